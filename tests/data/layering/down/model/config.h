// Fixture for tests/layering: a model header that includes the layers below it.
#include "engine/backend/op.h"
#include "engine/kv/pool.h"
#include "engine/tokenizer/bpe.h"
