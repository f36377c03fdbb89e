/* The libmosquitto floor of ferry-mqtt-rtt (seed 000's RTT study): a bare C
 * MQTT 5 client ping-pong with libmosquitto, QoS 1, TCP_NODELAY.
 *
 *   mosq_rtt echo   PORT HOST            answers <p>/ping with <p>/pong for p in mosq, mosq1
 *   mosq_rtt ping   PORT HOST threaded   the robot, libmosquitto's own network thread
 *                                        (mosquitto_loop_start: a publish wakes it)
 *   mosq_rtt ping   PORT HOST single     the robot in one thread (publish writes the
 *                                        socket; the same thread then loops for the pong)
 *
 * The robot reads "SEQ LEN" lines on stdin, publishes LEN bytes starting with
 * SEQ (8 bytes, little endian) and answers "SEQ RTT_NS" on stdout, the round
 * trip measured from just before the publish call to the pong's arrival in
 * the message callback (as ferry-mqtt-rtt measures the Rust configurations).
 * ferry-mqtt-rtt compiles this file at run time (cc ... -lmosquitto). */
#include <mosquitto.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t seq_of(const void *p, int len) {
    uint64_t s = 0;
    if (len >= 8) memcpy(&s, p, 8);
    return s;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arrived = PTHREAD_COND_INITIALIZER;
static uint64_t want_seq, got_at;
static int got;

static void on_pong(struct mosquitto *m, void *u, const struct mosquitto_message *msg,
                    const mosquitto_property *p) {
    (void)m; (void)u; (void)p;
    uint64_t at = now_ns();
    pthread_mutex_lock(&lock);
    if (seq_of(msg->payload, msg->payloadlen) == want_seq) {
        got = 1;
        got_at = at;
        pthread_cond_signal(&arrived);
    }
    pthread_mutex_unlock(&lock);
}

static void on_ping(struct mosquitto *m, void *u, const struct mosquitto_message *msg,
                    const mosquitto_property *p) {
    (void)u; (void)p;
    char topic[64];
    size_t n = strlen(msg->topic);
    if (n < 5 || n > 40 || strcmp(msg->topic + n - 5, "/ping") != 0) return;
    memcpy(topic, msg->topic, n - 5);
    strcpy(topic + n - 5, "/pong");
    mosquitto_publish_v5(m, NULL, topic, msg->payloadlen, msg->payload, 1, false, NULL);
}

static struct mosquitto *client(const char *id, const char *host, int port) {
    struct mosquitto *m = mosquitto_new(id, true, NULL);
    if (!m) { perror("mosquitto_new"); exit(1); }
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    int rc = mosquitto_connect(m, host, port, 60);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "connect %s:%d: %s\n", host, port, mosquitto_strerror(rc));
        exit(1);
    }
    return m;
}

/* Runs the loop until the subscription is acknowledged. */
static int subscribed;
static void on_subscribe(struct mosquitto *m, void *u, int mid, int n, const int *q,
                         const mosquitto_property *p) {
    (void)m; (void)u; (void)mid; (void)n; (void)q; (void)p;
    subscribed = 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: mosq_rtt echo|ping PORT HOST [threaded|single]\n");
        return 2;
    }
    int port = atoi(argv[2]);
    const char *host = argv[3];
    mosquitto_lib_init();
    if (strcmp(argv[1], "echo") == 0) {
        struct mosquitto *m = client("mosq-echo", host, port);
        mosquitto_message_v5_callback_set(m, on_ping);
        mosquitto_subscribe_v5_callback_set(m, on_subscribe);
        mosquitto_subscribe_v5(m, NULL, "mosq/ping", 1, 0, NULL);
        mosquitto_subscribe_v5(m, NULL, "mosq1/ping", 1, 0, NULL);
        while (!subscribed) mosquitto_loop(m, 100, 1);
        printf("ready\n");
        fflush(stdout);
        mosquitto_loop_forever(m, -1, 1);
        return 0;
    }
    int threaded = argc > 4 && strcmp(argv[4], "threaded") == 0;
    const char *name = threaded ? "mosq" : "mosq1";
    char ping[32], pong[32], id[32];
    snprintf(ping, sizeof ping, "%s/ping", name);
    snprintf(pong, sizeof pong, "%s/pong", name);
    snprintf(id, sizeof id, "%s-robot", name);
    struct mosquitto *m = client(id, host, port);
    mosquitto_message_v5_callback_set(m, on_pong);
    mosquitto_subscribe_v5_callback_set(m, on_subscribe);
    mosquitto_subscribe_v5(m, NULL, pong, 1, 0, NULL);
    while (!subscribed) mosquitto_loop(m, 100, 1);
    if (threaded) mosquitto_loop_start(m);
    static char buf[1 << 20];
    char line[64];
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        if (!threaded) {
            /* Keep the connection serviced while no trial runs. */
            struct pollfd in = {.fd = 0, .events = POLLIN};
            while (poll(&in, 1, 500) == 0) mosquitto_loop(m, 0, 1);
        }
        if (!fgets(line, sizeof line, stdin)) break;
        unsigned long long seq;
        int len;
        if (sscanf(line, "%llu %d", &seq, &len) != 2 || len < 8 || len > (int)sizeof buf) continue;
        memset(buf, 0xA5, (size_t)len);
        memcpy(buf, &seq, 8);
        pthread_mutex_lock(&lock);
        want_seq = seq;
        got = 0;
        pthread_mutex_unlock(&lock);
        uint64_t t0 = now_ns();
        mosquitto_publish_v5(m, NULL, ping, len, buf, 1, false, NULL);
        uint64_t deadline = t0 + 5000000000ull;
        pthread_mutex_lock(&lock);
        while (!got && now_ns() < deadline) {
            if (threaded) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                pthread_cond_timedwait(&arrived, &lock, &ts);
            } else {
                pthread_mutex_unlock(&lock);
                mosquitto_loop(m, 100, 1);
                pthread_mutex_lock(&lock);
            }
        }
        int ok = got;
        uint64_t at = got_at;
        pthread_mutex_unlock(&lock);
        if (ok) printf("%llu %llu\n", seq, (unsigned long long)(at - t0));
        else printf("%llu -1\n", seq);
        fflush(stdout);
    }
    return 0;
}
