// Fixture for tests/layering: a backend header that includes only its own layer and core.
#include "engine/backend/other.h"
#include "engine/core/dtype.h"
