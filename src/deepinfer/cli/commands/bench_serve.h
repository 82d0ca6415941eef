// `deepinfer bench serve`: the command line of cli/serve_bench (load against a live server).
#pragma once

int run_bench_serve(int argc, char** argv);
