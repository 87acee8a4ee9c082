#pragma once
// Loops over a packet's values are built twice: for AVX2 (a byte swap and an add of 8 lanes at
// once, vpshufb) and for any x86-64, and the loader picks one when the program starts (the
// compiler's target_clones). Elsewhere they are built once, for the target; so are they under
// ThreadSanitizer, whose instrumented clone resolver would run before its runtime is up and
// crash the program at load (llvm/llvm-project#163369).
// Before clang 18, clone resolvers of internal functions with the same name in two files could
// be merged (llvm/llvm-project#65114): give every cloned function a name of its own.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ATP_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define ATP_UNDER_TSAN 1
#endif

#if defined(__x86_64__) && !defined(ATP_UNDER_TSAN)
#define ATP_VECTOR_CLONES [[gnu::target_clones("avx2", "default")]]
#else
#define ATP_VECTOR_CLONES
#endif
