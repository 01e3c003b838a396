// PAGODA_HD marks small inline functions that both host code and CUDA kernels
// call (Philox, cache addressing). Under nvcc it expands to __host__ __device__;
// under a plain C++ compiler it expands to nothing.
#pragma once

#ifdef __CUDACC__
#define PAGODA_HD __host__ __device__
#else
#define PAGODA_HD
#endif
