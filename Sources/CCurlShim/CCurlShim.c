#include "CCurlShim.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>

CURLcode sinki_curl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode sinki_curl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode sinki_curl_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
CURLcode sinki_curl_easy_setopt_data_cb(CURL *h, CURLoption o, sinki_curl_data_cb cb) { return curl_easy_setopt(h, o, cb); }
CURLcode sinki_curl_easy_setopt_xferinfo_cb(CURL *h, sinki_curl_xferinfo_cb cb) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb); }
CURLcode sinki_curl_easy_setopt_seek_cb(CURL *h, sinki_curl_seek_cb cb) { return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, cb); }

// Both limits travel in the callback's one pointer: the probe count in the low 8 bits, the
// milliseconds above them (the values are small; no allocation to free with the handle).
static int sinki_dead_peer_sockopt(void *clientp, curl_socket_t fd, curlsocktype purpose) {
    if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKOPT_OK;
    uintptr_t packed = (uintptr_t)clientp;
    int probes = (int)(packed & 0xff);
    unsigned int unacknowledged = (unsigned int)(packed >> 8);
    // Best effort, like libcurl's own keepalive settings: a socket that refuses them still works.
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacknowledged, sizeof unacknowledged);
    return CURL_SOCKOPT_OK;
}

CURLcode sinki_curl_easy_set_dead_peer_limits(CURL *h, long keepalive_probes, long unacknowledged_ms) {
    if (keepalive_probes < 1 || keepalive_probes > 0xff || unacknowledged_ms < 0 || unacknowledged_ms > 0xffffff)
        return CURLE_BAD_FUNCTION_ARGUMENT;
    uintptr_t packed = ((uintptr_t)unacknowledged_ms << 8) | (uintptr_t)keepalive_probes;
    CURLcode code = curl_easy_setopt(h, CURLOPT_SOCKOPTDATA, (void *)packed);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, sinki_dead_peer_sockopt);
}

CURLcode sinki_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
CURLcode sinki_curl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
CURLcode sinki_curl_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

CURLMcode sinki_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
CURLMcode sinki_curl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
CURLMcode sinki_curl_multi_setopt_socket_cb(CURLM *m, sinki_curl_socket_cb cb) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, cb); }
CURLMcode sinki_curl_multi_setopt_timer_cb(CURLM *m, sinki_curl_timer_cb cb) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, cb); }

CURLcode sinki_curl_msg_result(const CURLMsg *msg) { return msg->data.result; }
