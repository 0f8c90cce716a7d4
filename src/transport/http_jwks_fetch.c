/* The JWKS URL's fetcher (see http_jwks_fetch.h). */
#include "transport/http_jwks_fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"
#include "lib/util.h"

struct jwks_fetch {
    char *url;
    char *ca_file;       /* NULL: the system's CA certificates */
    uint64_t refresh_ms; /* 0: early fetches only */
    uint64_t min_gap_ms; /* between an early fetch and the fetch before */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* Under lock: */
    bool stop, early_wanted;
    char *fresh; /* fetched, not yet taken */
    size_t fresh_len;
    /* The fetcher's own: */
    char *last; /* the last document handed over (or in force at the start) */
    size_t last_len;
    struct sbx_err last_error; /* the last failure, logged once */
};

struct body {
    char *data;
    size_t len;
    bool too_large;
};

static size_t on_data(char *ptr, size_t size, size_t n, void *arg)
{
    struct body *b = arg;
    size_t add = size * n;
    if (add > JWKS_FETCH_MAX_BYTES - b->len) {
        b->too_large = true;
        return 0; /* aborts the transfer */
    }
    b->data = xrealloc(b->data, b->len + add + 1);
    memcpy(b->data + b->len, ptr, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

static bool stopping(struct jwks_fetch *f)
{
    pthread_mutex_lock(&f->lock);
    bool stop = f->stop;
    pthread_mutex_unlock(&f->lock);
    return stop;
}

/* Ends a transfer under way once the fetcher is told to stop. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return stopping(arg);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void init_curl(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* owner: the fetcher whose stop aborts the transfer; NULL for the startup fetch. */
static int fetch(const char *url, const char *ca_file, struct jwks_fetch *owner, char **text,
                 size_t *len, struct sbx_err *err)
{
    pthread_once(&curl_once, init_curl);
    if (curl_init_rc != CURLE_OK)
        return sbx_fail(err, EIO, "libcurl: %s", curl_easy_strerror(curl_init_rc));
    CURL *h = curl_easy_init();
    if (!h)
        return sbx_fail(err, ENOMEM, "libcurl: cannot start a transfer");
    struct body b = {0};
    char curl_err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    /* A redirect could lead to a plain-http or other host the URL check never saw. */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)JWKS_FETCH_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)JWKS_FETCH_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)JWKS_FETCH_MAX_BYTES);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "mcp-sandbox/" SBX_VERSION);
    if (ca_file && *ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca_file);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    if (owner) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, owner);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    int r = 0;
    if (b.too_large || rc == CURLE_FILESIZE_EXCEEDED)
        r = sbx_fail(err, EFBIG, "%s: larger than %u bytes", url, JWKS_FETCH_MAX_BYTES);
    else if (rc != CURLE_OK)
        r = sbx_fail(err, EIO, "%s: %s", url, *curl_err ? curl_err : curl_easy_strerror(rc));
    else if (status != 200)
        r = sbx_fail(err, EIO, "%s: HTTP status %ld", url, status);
    else if (!b.data)
        r = sbx_fail(err, EIO, "%s: empty response", url);
    if (r < 0) {
        free(b.data);
        return r;
    }
    *text = b.data;
    *len = b.len;
    return 0;
}

int jwks_fetch_once(const struct jwks_fetch_config *c, char **text, size_t *len,
                    struct sbx_err *err)
{
    return fetch(c->url, c->ca_file, NULL, text, len, err);
}

int jwks_url_check(const char *url, struct sbx_err *err)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL;
    int r = 0;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
        r = sbx_fail(err, EINVAL, "http.jwt_jwks_url: not a URL: %s", url);
    else if (strcmp(scheme, "https") != 0 &&
             !(strcmp(scheme, "http") == 0 &&
               (strcmp(host, "127.0.0.1") == 0 || strcmp(host, "[::1]") == 0 ||
                strcmp(host, "localhost") == 0)))
        r = sbx_fail(err, EINVAL,
                     "http.jwt_jwks_url must be https:// (plain http:// only to 127.0.0.1, [::1] "
                     "or localhost): keys fetched in the clear could be swapped on the way");
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return r;
}

/* Waits until a fetch is due: the periodic time, or an early request once the gap since the
 * last fetch has passed. False when told to stop instead. */
static bool wait_for_turn(struct jwks_fetch *f, uint64_t last_fetch)
{
    bool go = false;
    pthread_mutex_lock(&f->lock);
    while (!f->stop) {
        uint64_t now = now_ms(), gap_end = last_fetch + f->min_gap_ms;
        uint64_t due = f->refresh_ms ? last_fetch + f->refresh_ms : UINT64_MAX;
        if (now >= due || (f->early_wanted && now >= gap_end)) {
            go = true;
            break;
        }
        if (f->early_wanted && gap_end < due)
            due = gap_end;
        if (due == UINT64_MAX) {
            pthread_cond_wait(&f->wake, &f->lock);
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(due / 1000),
                              .tv_nsec = (long)(due % 1000) * 1000000};
        pthread_cond_timedwait(&f->wake, &f->lock, &ts);
    }
    f->early_wanted = false;
    pthread_mutex_unlock(&f->lock);
    return go;
}

static void fetch_and_hand_over(struct jwks_fetch *f)
{
    char *text = NULL;
    size_t len = 0;
    struct sbx_err err = {0};
    if (fetch(f->url, f->ca_file, f, &text, &len, &err) < 0) {
        /* A transfer that the stop aborted is not worth a warning. */
        if (strcmp(err.msg, f->last_error.msg) != 0 && !stopping(f)) {
            f->last_error = err;
            log_emit(LOG_LVL_WARNING, "jwt keys not fetched; the previous keys stay in force",
                     "error", err.msg, NULL);
        }
        return;
    }
    f->last_error.msg[0] = '\0';
    if (len == f->last_len && memcmp(text, f->last, len) == 0) {
        free(text);
        return;
    }
    free(f->last);
    f->last = xstrndup(text, len);
    f->last_len = len;
    pthread_mutex_lock(&f->lock);
    free(f->fresh);
    f->fresh = text;
    f->fresh_len = len;
    pthread_mutex_unlock(&f->lock);
}

/* What a fetcher holds once its thread is gone (or never started). */
static void fetch_free(struct jwks_fetch *f)
{
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->lock);
    free(f->fresh);
    free(f->last);
    free(f->ca_file);
    free(f->url);
    free(f);
}

static void *fetcher_main(void *arg)
{
    struct jwks_fetch *f = arg;
    uint64_t last_fetch = now_ms(); /* the startup fetch, just before */
    while (wait_for_turn(f, last_fetch)) {
        fetch_and_hand_over(f);
        last_fetch = now_ms();
    }
    return NULL;
}

int jwks_fetch_start(const struct jwks_fetch_config *c, const char *first, size_t first_len,
                     struct jwks_fetch **out, struct sbx_err *err)
{
    struct jwks_fetch *f = xcalloc(1, sizeof(*f));
    f->url = xstrdup(c->url);
    f->ca_file = c->ca_file && *c->ca_file ? xstrdup(c->ca_file) : NULL;
    f->refresh_ms = (uint64_t)c->refresh_s * 1000;
    f->min_gap_ms = (uint64_t)c->min_gap_s * 1000;
    f->last = xstrndup(first, first_len);
    f->last_len = first_len;
    pthread_mutex_init(&f->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->wake, &ca);
    pthread_condattr_destroy(&ca);
    /* The fetcher takes no signal: they are the loop thread's to handle. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int e = pthread_create(&f->thread, NULL, fetcher_main, f);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        fetch_free(f);
        return sbx_fail_errno(err, e, "starting the JWKS fetcher thread");
    }
    *out = f;
    return 0;
}

char *jwks_fetch_take(struct jwks_fetch *f, size_t *len)
{
    pthread_mutex_lock(&f->lock);
    char *text = f->fresh;
    *len = f->fresh_len;
    f->fresh = NULL;
    f->fresh_len = 0;
    pthread_mutex_unlock(&f->lock);
    return text;
}

void jwks_fetch_request(struct jwks_fetch *f)
{
    pthread_mutex_lock(&f->lock);
    f->early_wanted = true;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->lock);
}

void jwks_fetch_stop(struct jwks_fetch *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    fetch_free(f);
}
