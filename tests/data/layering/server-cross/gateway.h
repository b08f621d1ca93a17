#include "server/http/http_server.h"
