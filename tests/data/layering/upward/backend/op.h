// Fixture for tests/layering: a backend header that includes the model layer above it.
#include "engine/model/config.h"
