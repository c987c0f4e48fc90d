#include "CCurlShim.h"

CURLcode sinki_curl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode sinki_curl_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode sinki_curl_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
CURLcode sinki_curl_easy_setopt_data_cb(CURL *h, CURLoption o, sinki_curl_data_cb cb) { return curl_easy_setopt(h, o, cb); }
CURLcode sinki_curl_easy_setopt_xferinfo_cb(CURL *h, sinki_curl_xferinfo_cb cb) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb); }
CURLcode sinki_curl_easy_setopt_seek_cb(CURL *h, sinki_curl_seek_cb cb) { return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, cb); }

CURLcode sinki_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
CURLcode sinki_curl_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
CURLcode sinki_curl_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

CURLMcode sinki_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
CURLMcode sinki_curl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
CURLMcode sinki_curl_multi_setopt_socket_cb(CURLM *m, sinki_curl_socket_cb cb) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, cb); }
CURLMcode sinki_curl_multi_setopt_timer_cb(CURLM *m, sinki_curl_timer_cb cb) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, cb); }

CURLcode sinki_curl_msg_result(const CURLMsg *msg) { return msg->data.result; }
