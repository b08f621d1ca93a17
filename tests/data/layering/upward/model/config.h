// Fixture for tests/layering: a model header (the target of the upward include).
