/* The MPS helpers: the percentage rule (checked against the driver's readings on an H200),
 * environment blocks, and finding the server in a fake /proc tree. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "l2p_mps.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

#define MiB (1024.0 * 1024.0)

static void test_set_aside_rule(void)
{
    /* H200: 60 MiB of L2, 3.75 MiB granule. Readings of a process with the variable set. */
    const size_t l2 = 60 << 20, g = 3932160;
    const struct { double pct, mib; } seen[] = {
        {0, 0}, {1, 3.75}, {10, 7.5}, {24, 15}, {25, 15}, {30, 18.75}, {50, 30}, {62, 37.5}};
    for (size_t i = 0; i < sizeof seen / sizeof *seen; i++)
        CHECK(l2p_mps_set_aside(seen[i].pct, l2, g) == (size_t)(seen[i].mib * MiB));
    CHECK(l2p_mps_set_aside(12.5, 1000, 0) == 125);
    CHECK(l2p_mps_set_aside(-3, l2, g) == 0);
}

static void test_parse_percent(void)
{
    CHECK(l2p_mps_parse_percent("25") == 25.0);
    CHECK(l2p_mps_parse_percent(" 12.5\n") == 12.5);
    CHECK(l2p_mps_parse_percent("0") == 0.0);
    CHECK(l2p_mps_parse_percent("100") == 100.0);
    CHECK(l2p_mps_parse_percent("101") < 0);
    CHECK(l2p_mps_parse_percent("-1") < 0);
    CHECK(l2p_mps_parse_percent("25%") < 0);
    CHECK(l2p_mps_parse_percent("") < 0);
    CHECK(l2p_mps_parse_percent("nan") < 0);
}

static void test_environ(void)
{
    const char block[] = "A=1\0CUDA_MPS_PIPE_DIRECTORY=/tmp/p\0B=\0CUDA_MPS_PIPE=/x\0";
    char out[16];
    CHECK(l2p_mps_environ_get(block, sizeof block - 1, "A", out, sizeof out) && !strcmp(out, "1"));
    CHECK(l2p_mps_environ_get(block, sizeof block - 1, L2P_MPS_PIPE_VAR, out, sizeof out) &&
          !strcmp(out, "/tmp/p"));
    CHECK(l2p_mps_environ_get(block, sizeof block - 1, "B", out, sizeof out) && !strcmp(out, ""));
    CHECK(!l2p_mps_environ_get(block, sizeof block - 1, "CUDA_MPS", out, sizeof out));
    CHECK(!l2p_mps_environ_get(block, sizeof block - 1, "C", out, sizeof out));
    /* Truncated to the buffer, still terminated. */
    CHECK(l2p_mps_environ_get(block, sizeof block - 1, L2P_MPS_PIPE_VAR, out, 4) &&
          !strcmp(out, "/tm"));
    /* A block whose last entry has no terminator is not read past its end. */
    CHECK(l2p_mps_environ_get("X=12", 3, "X", out, sizeof out) && !strcmp(out, "1"));
}

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

static void fake_proc(const char *root, const char *pid, const char *cmd, size_t cmdlen,
                      const char *env, size_t envlen)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, pid);
    mkdir(dir, 0700);
    write_file(dir, "cmdline", cmd, cmdlen);
    if (env) write_file(dir, "environ", env, envlen);
}

#define S(lit) lit, sizeof lit - 1

static void test_find_server(void)
{
    char root[] = "/tmp/l2p-fakeproc-XXXXXX";
    l2p_mps_server s;
    if (!mkdtemp(root)) {
        CHECK(!"mkdtemp");
        return;
    }
    l2p_mps_find_server(root, "/tmp/mine", &s);
    CHECK(!s.found && s.percent < 0);
    /* The control daemon and an unrelated process are not servers. */
    fake_proc(root, "100", S("nvidia-cuda-mps-control\0-d\0"),
              S("CUDA_MPS_PIPE_DIRECTORY=/tmp/mine\0" L2P_MPS_PCT_VAR "=40\0"));
    fake_proc(root, "101", S("python3\0x.py\0"), S(L2P_MPS_PCT_VAR "=40\0"));
    l2p_mps_find_server(root, "/tmp/mine", &s);
    CHECK(!s.found);
    /* A server on another pipe directory is not ours; one on the default is found by it. */
    fake_proc(root, "200", S("/usr/bin/nvidia-cuda-mps-server\0"),
              S("CUDA_MPS_PIPE_DIRECTORY=/tmp/other\0" L2P_MPS_PCT_VAR "=10\0"));
    fake_proc(root, "201", S("nvidia-cuda-mps-server\0"), S(L2P_MPS_PCT_VAR "=20\0"));
    l2p_mps_find_server(root, "/tmp/mine", &s);
    CHECK(!s.found);
    l2p_mps_find_server(root, L2P_MPS_DEFAULT_PIPE, &s);
    CHECK(s.found && s.readable && s.pid == 201 && s.percent == 20.0);
    /* Ours, with its percentage. */
    fake_proc(root, "300", S("nvidia-cuda-mps-server\0"),
              S("HOME=/root\0CUDA_MPS_PIPE_DIRECTORY=/tmp/mine\0" L2P_MPS_PCT_VAR "=25\0"));
    l2p_mps_find_server(root, "/tmp/mine", &s);
    CHECK(s.found && s.readable && s.pid == 300 && s.percent == 25.0);
    /* A server without the variable: found, readable, no percentage. */
    fake_proc(root, "400", S("nvidia-cuda-mps-server\0"), S("CUDA_MPS_PIPE_DIRECTORY=/tmp/p4\0"));
    l2p_mps_find_server(root, "/tmp/p4", &s);
    CHECK(s.found && s.readable && s.pid == 400 && s.percent < 0);
    /* A garbage percentage reads as none. */
    fake_proc(root, "500", S("nvidia-cuda-mps-server\0"),
              S("CUDA_MPS_PIPE_DIRECTORY=/tmp/p5\0" L2P_MPS_PCT_VAR "=lots\0"));
    l2p_mps_find_server(root, "/tmp/p5", &s);
    CHECK(s.found && s.readable && s.percent < 0);
    /* An environment we may not read (another user's server): found, percentage unknown. */
    fake_proc(root, "600", S("nvidia-cuda-mps-server\0"), NULL, 0);
    l2p_mps_find_server(root, "/tmp/p6", &s);
    CHECK(s.found && !s.readable && s.pid == 600 && s.percent < 0);
    /* The rank prefers a readable match over an unreadable one. */
    l2p_mps_find_server(root, "/tmp/mine", &s);
    CHECK(s.pid == 300);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    test_set_aside_rule();
    test_parse_percent();
    test_environ();
    test_find_server();
    printf("test_mps: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
