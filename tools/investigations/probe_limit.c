/* Set and read the persisting-L2 limit with the runtime alone; build with static and with
 * shared cudart to compare:  gcc probe_limit.c -I$CUDA/include -L$CUDA/lib64 -lcudart[_static] */
#include <stdio.h>
#include <cuda_runtime_api.h>

static void show(const char *what)
{
    size_t v = 12345678;
    cudaError_t rc = cudaDeviceGetLimit(&v, cudaLimitPersistingL2CacheSize);
    int dev = -1;
    cudaGetDevice(&dev);
    printf("%-28s rc=%d value=%zu device=%d\n", what, (int)rc, v, dev);
}

int main(void)
{
    int n = 0;
    cudaGetDeviceCount(&n);
    show("first get");
    printf("set 12345 rc=%d\n", (int)cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 12345));
    show("after set 12345");
    show("again");
    cudaSetDevice(0);
    show("after cudaSetDevice(0)");
    printf("set 39321600 rc=%d\n", (int)cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 39321600));
    show("after set max");
    cudaFree(0);
    show("after cudaFree(0)");
    cudaDeviceSynchronize();
    show("after sync");
    return 0;
}
