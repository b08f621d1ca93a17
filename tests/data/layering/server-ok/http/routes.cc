#include "server/gateway.h"
#include "server/http/http_server.h"
