#define _GNU_SOURCE /* getuid, strtod's full grammar */
#include "l2p_mps.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int l2p_mps_environ_get(const char *block, size_t len, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < len;) {
        const char *e = block + i;
        size_t elen = strnlen(e, len - i);
        if (elen > n && e[n] == '=' && memcmp(e, name, n) == 0) {
            size_t vlen = elen - n - 1;
            if (cap == 0) return 1;
            if (vlen >= cap) vlen = cap - 1;
            memcpy(out, e + n + 1, vlen);
            out[vlen] = '\0';
            return 1;
        }
        i += elen + 1;
    }
    return 0;
}

double l2p_mps_parse_percent(const char *text)
{
    char *end;
    double v;
    while (*text == ' ' || *text == '\t') text++;
    if (!*text) return -1.0;
    v = strtod(text, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n') end++;
    if (*end || !(v >= 0.0 && v <= 100.0)) return -1.0;
    return v;
}

size_t l2p_mps_set_aside(double percent, size_t l2_size, size_t granule)
{
    if (!(percent > 0.0)) return 0;
    /* In bytes: 60 MiB at 24 % is 15099494.4 B, which the driver rounds up to 15 MiB. */
    double bytes = ceil(percent / 100.0 * (double)l2_size);
    if (granule == 0) return (size_t)bytes;
    return (size_t)ceil(bytes / (double)granule) * granule;
}

/* Read a whole small /proc file; NULL when it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, n = 0;
    char *buf;
    if (!f) return NULL;
    buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *bigger = cap < (1u << 22) ? realloc(buf, cap * 2) : NULL;
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    fclose(f);
    if (buf) *len = n;
    return buf;
}

static int is_server(const char *proc_root, const char *pid)
{
    char path[512];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s/cmdline", proc_root, pid);
    char *cmd = slurp(path, &len);
    if (!cmd) return 0;
    const char *argv0 = len ? cmd : "";
    if (len && memchr(cmd, '\0', len) == NULL) argv0 = ""; /* unterminated: ignore */
    const char *base = strrchr(argv0, '/');
    int yes = strcmp(base ? base + 1 : argv0, "nvidia-cuda-mps-server") == 0;
    free(cmd);
    return yes;
}

/* Fill `cand` from the server's environment when it serves `pipe`; 1 when it does. */
static int read_server(const char *proc_root, const char *pid, const char *pipe,
                       l2p_mps_server *cand)
{
    char path[512], value[4096];
    size_t len = 0;
    memset(cand, 0, sizeof *cand);
    cand->found = 1;
    cand->pid = strtol(pid, NULL, 10);
    cand->percent = -1.0;
    snprintf(path, sizeof path, "%s/%s/environ", proc_root, pid);
    char *env = slurp(path, &len);
    if (!env) return 1; /* another user's server: found, percentage unknown */
    const char *its_pipe = L2P_MPS_DEFAULT_PIPE;
    if (l2p_mps_environ_get(env, len, L2P_MPS_PIPE_VAR, value, sizeof value)) its_pipe = value;
    if (strcmp(its_pipe, pipe) != 0) {
        free(env);
        return 0;
    }
    cand->readable = 1;
    if (l2p_mps_environ_get(env, len, L2P_MPS_PCT_VAR, value, sizeof value))
        cand->percent = l2p_mps_parse_percent(value);
    free(env);
    return 1;
}

static int owned_by_me(const char *proc_root, const char *pid)
{
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", proc_root, pid);
    return stat(path, &sb) == 0 && sb.st_uid == getuid();
}

void l2p_mps_find_server(const char *proc_root, const char *pipe_dir, l2p_mps_server *out)
{
    DIR *d;
    struct dirent *e;
    int best = 0; /* 3: readable and mine, 2: readable, 1: found only */
    memset(out, 0, sizeof *out);
    out->percent = -1.0;
    if (!pipe_dir) pipe_dir = getenv(L2P_MPS_PIPE_VAR);
    if (!pipe_dir || !*pipe_dir) pipe_dir = L2P_MPS_DEFAULT_PIPE;
    d = opendir(proc_root);
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        l2p_mps_server cand;
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || !is_server(proc_root, e->d_name))
            continue;
        if (!read_server(proc_root, e->d_name, pipe_dir, &cand)) continue;
        int rank = cand.readable ? 2 + owned_by_me(proc_root, e->d_name) : 1;
        if (rank > best) {
            *out = cand;
            best = rank;
        }
    }
    closedir(d);
}
