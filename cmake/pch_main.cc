// The program that builds cmake/precompiled_headers.cmake's PCH for programs (built, never run).
int main() { return 0; }
