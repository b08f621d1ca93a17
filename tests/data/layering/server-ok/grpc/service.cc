#include "server/gateway.h"
#include "server/grpc/status_mapping.h"
