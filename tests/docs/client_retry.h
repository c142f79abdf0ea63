/*
 * client_retry.h - the retrying loop of docs/client.md runs on a connection the program made
 * before it (after client_app.h): DOCTEST_SETUP, which the doc tests put at the start of main.
 */
#include <sluice/client.h>

#define DOCTEST_SETUP                                                                              \
    slc_client_t *c = slc_connect("127.0.0.1", 6390, NULL, 500);                                   \
    slc_decision_t d;                                                                              \
    int rc;
