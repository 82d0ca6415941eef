// The translation unit that builds cmake/precompiled_headers.cmake's library and test PCHs.
