#include "server/gateway.h"
