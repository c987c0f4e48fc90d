// libcurl's setopt and getinfo calls are variadic, which Swift cannot call. Each wrapper here fixes
// one argument kind so the Swift side stays typed. It can go when Swift imports C variadics.
#ifndef SINKI_CCURLSHIM_H
#define SINKI_CCURLSHIM_H
#include <curl/curl.h>

typedef size_t (*sinki_curl_data_cb)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*sinki_curl_xferinfo_cb)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                      curl_off_t ultotal, curl_off_t ulnow);
typedef int (*sinki_curl_seek_cb)(void *userdata, curl_off_t offset, int origin);
typedef int (*sinki_curl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*sinki_curl_timer_cb)(CURLM *multi, long timeout_ms, void *userp);

CURLcode sinki_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode sinki_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode sinki_curl_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value);
CURLcode sinki_curl_easy_setopt_data_cb(CURL *handle, CURLoption option, sinki_curl_data_cb cb);
CURLcode sinki_curl_easy_setopt_xferinfo_cb(CURL *handle, sinki_curl_xferinfo_cb cb);
CURLcode sinki_curl_easy_setopt_seek_cb(CURL *handle, sinki_curl_seek_cb cb);

/// Sets TCP_KEEPCNT and TCP_USER_TIMEOUT on each connection the handle opens (through
/// CURLOPT_SOCKOPTFUNCTION: libcurl 7.88 has no option for either; CURLOPT_TCP_KEEPCNT came in 8.9).
CURLcode sinki_curl_easy_set_dead_peer_limits(CURL *handle, long keepalive_probes, long unacknowledged_ms);

CURLcode sinki_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode sinki_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode sinki_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value);

CURLMcode sinki_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode sinki_curl_multi_setopt_ptr(CURLM *multi, CURLMoption option, void *value);
CURLMcode sinki_curl_multi_setopt_socket_cb(CURLM *multi, sinki_curl_socket_cb cb);
CURLMcode sinki_curl_multi_setopt_timer_cb(CURLM *multi, sinki_curl_timer_cb cb);

/// The result code of a CURLMSG_DONE message (a union member Swift reads awkwardly).
CURLcode sinki_curl_msg_result(const CURLMsg *msg);
#endif
