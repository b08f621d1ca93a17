#include "server/grpc/service.h"
#include "server/http/routes.h"
