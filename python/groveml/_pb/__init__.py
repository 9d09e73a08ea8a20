"""grove.v1 messages and stubs, generated from proto/grove/v1/grove.proto when the package is built
(python/CMakeLists.txt)."""
