/*
 * The C arrows (bench/arrows): a quiver-style sender and receiver on libqpid-proton's
 * proactor, with the same command line, message stamp, record file and JSON line as
 * bench/arrows/python_arrow.py (the contract is bench/arrows/spec.py).
 *
 *   arrow send|receive --host H --port P --address A [--listen] [--count N | --duration S]
 *         [--body-size B] [--credit C] [--presettled] [--durable] [--rate R] [--max-unsettled U]
 *         [--connections K] [--links L] [--senders N] [--user U --password W]
 *         [--out FILE] [--timeout S]
 *
 * Body: the send time (CLOCK_MONOTONIC ns, big-endian int64), a last-message flag byte,
 * zeros up to --body-size, as one data section. The receiver appends (send_ns, receive_ns)
 * int64 pairs (native order) to --out and accepts unsettled deliveries; it grants --credit
 * per link and tops it up to --credit once it is down to half. "ready" on stderr: listening, or
 * every link attached. Built by bench/arrows/build.py.
 */
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/listener.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/transport.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_CONNECTIONS 256

typedef struct {
  int sender;
  const char *host, *port, *address, *user, *password, *out;
  int listen, presettled, durable, credit, connections, links, senders;
  long long count, rate, max_unsettled;
  double duration, timeout;
  long body_size;

  pn_proactor_t *proactor;
  pn_listener_t *listener;
  pn_connection_t *conns[MAX_CONNECTIONS];
  int nconns, attached;
  pn_message_t *message;
  pn_rwbytes_t buffer;
  char *body;
  int64_t start_ns, end_ns, deadline_ns;
  long long sent, accepted, received, ended, links_ended;
  int done, failed;
  char error[512];
  int64_t *records;
  size_t nrecords, cap;
} app_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void fail(app_t *app, const char *what, pn_condition_t *cond) {
  if (app->done || app->failed) return;
  app->failed = 1;
  snprintf(app->error, sizeof(app->error), "%s: %s %s", what,
           cond && pn_condition_is_set(cond) ? pn_condition_get_name(cond) : "",
           cond && pn_condition_is_set(cond) ? pn_condition_get_description(cond) : "");
}

/* A listener leaves closing to the sender (whose other connections may still have
   acknowledgements to read), unless it failed; a client closes its own connections. */
static void close_all(app_t *app) {
  if (!app->listen || app->failed)
    for (int i = 0; i < app->nconns; ++i) pn_connection_wake(app->conns[i]);
  if (app->listener) pn_listener_close(app->listener);
}

static void finish(app_t *app) {
  if (app->done) return;
  app->done = 1;
  app->end_ns = now_ns();
  close_all(app);
}

/* --- sender ------------------------------------------------------------------------ */

static int all_sent(app_t *app) {
  if (app->count) return app->sent >= app->count;
  return app->links_ended >= (long long)app->connections * app->links;
}

static int send_complete(app_t *app) {
  return all_sent(app) && (app->presettled || app->accepted >= app->sent);
}

static void send_one(app_t *app, pn_link_t *l, int last) {
  int64_t t = now_ns();
  for (int i = 0; i < 8; ++i) app->body[i] = (char)(((uint64_t)t >> (8 * (7 - i))) & 0xff);
  app->body[8] = last ? 1 : 0;
  pn_message_clear(app->message);
  pn_message_set_durable(app->message, app->durable);
  pn_data_t *body = pn_message_body(app->message);
  pn_data_put_binary(body, pn_bytes(app->body_size, app->body));
  ++app->sent;
  pn_delivery_t *d = pn_delivery(l, pn_dtag((const char *)&app->sent, sizeof(app->sent)));
  if (pn_message_send(app->message, l, &app->buffer) < 0) {
    snprintf(app->error, sizeof(app->error), "send: %s",
             pn_error_text(pn_message_error(app->message)));
    app->failed = 1;
    return;
  }
  if (app->presettled) pn_delivery_settle(d);
}

/* Send what credit, the count/duration and the rate allow on this connection's links. */
static void pump_sender(app_t *app, pn_connection_t *c) {
  if (app->done || app->failed || !app->start_ns) return;
  int ending = !app->count && now_ns() - app->start_ns >= (int64_t)(app->duration * 1e9);
  for (pn_link_t *l = pn_link_head(c, PN_LOCAL_ACTIVE); l; l = pn_link_next(l, PN_LOCAL_ACTIVE)) {
    if (!pn_link_is_sender(l)) continue;
    int *ended = (int *)pn_link_get_context(l);
    while (pn_link_credit(l) > 0 && !all_sent(app) && !*ended) {
      if (app->rate && now_ns() < app->start_ns + app->sent * 1000000000LL / app->rate) break;
      if (app->max_unsettled && !app->presettled && app->sent - app->accepted >= app->max_unsettled)
        break;
      send_one(app, l, ending);
      if (ending) {
        *ended = 1;
        ++app->links_ended;
      }
      if (app->rate) break; /* round robin at a fixed rate */
    }
  }
  if (send_complete(app)) finish(app);
}

/* --- receiver ------------------------------------------------------------------------ */

static void record(app_t *app, int64_t sent, int64_t got) {
  if (app->nrecords + 2 > app->cap) {
    app->cap = app->cap ? app->cap * 2 : 1 << 16;
    app->records = realloc(app->records, app->cap * sizeof(int64_t));
    if (!app->records) { perror("realloc"); exit(1); }
  }
  app->records[app->nrecords++] = sent;
  app->records[app->nrecords++] = got;
}

static void on_delivery_in(app_t *app, pn_delivery_t *d) {
  pn_link_t *l = pn_delivery_link(d);
  if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return;
  int64_t got = now_ns();
  size_t size = pn_delivery_pending(d);
  if (app->buffer.size < size) {
    app->buffer.start = realloc(app->buffer.start, size);
    app->buffer.size = size;
  }
  ssize_t n = pn_link_recv(l, app->buffer.start, size);
  pn_link_advance(l);
  if (n < 0 || pn_message_decode(app->message, app->buffer.start, (size_t)n) != 0) {
    snprintf(app->error, sizeof(app->error), "undecodable message");
    app->failed = 1;
    return;
  }
  pn_data_t *body = pn_message_body(app->message);
  pn_data_rewind(body);
  pn_data_next(body);
  pn_bytes_t bytes = pn_data_get_binary(body);
  int64_t sent = 0;
  int last = 0;
  if (bytes.size >= 9) {
    for (int i = 0; i < 8; ++i) sent = (sent << 8) | (unsigned char)bytes.start[i];
    last = bytes.start[8] == 1;
  }
  record(app, sent, got);
  ++app->received;
  app->ended += last;
  if (!pn_delivery_settled(d)) pn_delivery_update(d, PN_ACCEPTED);
  pn_delivery_settle(d);
  int credit = pn_link_credit(l);
  if (credit <= app->credit / 2) pn_link_flow(l, app->credit - credit);
  if ((app->count && app->received >= app->count) || (!app->count && app->ended >= app->senders))
    finish(app);
}

/* --- events ------------------------------------------------------------------------- */

static void open_links(app_t *app, pn_connection_t *c) {
  pn_session_t *s = pn_session(c);
  pn_session_open(s);
  for (int i = 0; i < app->links; ++i) {
    char name[64];
    snprintf(name, sizeof(name), "%s-%d-%d", app->sender ? "send" : "receive", app->nconns, i);
    pn_link_t *l = app->sender ? pn_sender(s, name) : pn_receiver(s, name);
    pn_link_set_snd_settle_mode(l, app->presettled ? PN_SND_SETTLED : PN_SND_UNSETTLED);
    pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
    pn_terminus_set_address(app->sender ? pn_link_target(l) : pn_link_source(l), app->address);
    pn_terminus_set_address(app->sender ? pn_link_source(l) : pn_link_target(l), name);
    pn_link_set_context(l, calloc(1, sizeof(int)));
    pn_link_open(l);
    if (!app->sender) pn_link_flow(l, app->credit);
  }
}

static int handle(app_t *app, pn_event_t *e) {
  pn_connection_t *c = pn_event_connection(e);
  switch (pn_event_type(e)) {
  case PN_LISTENER_ACCEPT:
    if (app->nconns < MAX_CONNECTIONS) {
      pn_connection_t *conn = pn_connection();
      app->conns[app->nconns++] = conn;
      pn_listener_accept2(pn_event_listener(e), conn, NULL);
    }
    break;
  case PN_CONNECTION_INIT:
    pn_connection_set_container(c, app->sender ? "arrow-send" : "arrow-receive");
    if (!app->listen) {
      if (app->user[0]) {
        pn_connection_set_user(c, app->user);
        pn_connection_set_password(c, app->password);
      }
      pn_connection_open(c);
      open_links(app, c);
    }
    break;
  case PN_CONNECTION_BOUND: {
    pn_transport_t *t = pn_event_transport(e);
    if (app->listen) {
      pn_transport_require_auth(t, 0);
      pn_sasl_allowed_mechs(pn_sasl(t), "ANONYMOUS");
    } else { /* always SASL (5.3): PLAIN with --user, else ANONYMOUS */
      pn_sasl_t *sasl = pn_sasl(t);
      if (app->user[0]) pn_sasl_set_allow_insecure_mechs(sasl, 1);
      else pn_sasl_allowed_mechs(sasl, "ANONYMOUS");
    }
    break;
  }
  case PN_CONNECTION_REMOTE_OPEN:
    if (app->listen) pn_connection_open(c);
    break;
  case PN_SESSION_REMOTE_OPEN:
    if (pn_session_state(pn_event_session(e)) & PN_LOCAL_UNINIT) pn_session_open(pn_event_session(e));
    break;
  case PN_LISTENER_OPEN:
    fprintf(stderr, "ready\n"); /* the contract with bench/arrows/run.py */
    fflush(stderr);
    break;
  case PN_LINK_REMOTE_OPEN: {
    pn_link_t *l = pn_event_link(e);
    if (!app->listen && ++app->attached == app->connections * app->links) {
      fprintf(stderr, "ready\n");
      fflush(stderr);
    }
    if (pn_link_state(l) & PN_LOCAL_UNINIT) { /* a listener answers the peer's attach */
      pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
      pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
      pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
      pn_link_set_context(l, calloc(1, sizeof(int)));
      pn_link_open(l);
      if (!pn_link_is_sender(l)) pn_link_flow(l, app->credit);
    }
    break;
  }
  case PN_LINK_FLOW:
    if (app->sender) {
      if (!app->start_ns) app->start_ns = now_ns();
      pump_sender(app, c);
    }
    break;
  case PN_DELIVERY: {
    pn_delivery_t *d = pn_event_delivery(e);
    if (pn_link_is_sender(pn_delivery_link(d))) {
      if (pn_delivery_remote_state(d) == PN_ACCEPTED) {
        ++app->accepted;
        pn_delivery_settle(d);
      } else if (pn_delivery_remote_state(d)) {
        snprintf(app->error, sizeof(app->error), "delivery not accepted: state %d",
                 (int)pn_delivery_remote_state(d));
        app->failed = 1;
      }
      pump_sender(app, c);
    } else {
      on_delivery_in(app, d);
    }
    break;
  }
  case PN_CONNECTION_WAKE:
    if (app->done || app->failed) {
      if (!(pn_connection_state(c) & PN_LOCAL_CLOSED)) pn_connection_close(c);
    } else if (app->sender) {
      pump_sender(app, c);
    }
    break;
  case PN_PROACTOR_TIMEOUT:
    if (now_ns() > app->deadline_ns) {
      snprintf(app->error, sizeof(app->error), "arrow %s timed out", app->sender ? "send" : "receive");
      app->failed = 1;
      return 0;
    }
    if (!app->done) {
      if (app->sender) for (int i = 0; i < app->nconns; ++i) pn_connection_wake(app->conns[i]);
      pn_proactor_set_timeout(app->proactor, app->sender && app->rate ? 1 : 50);
    }
    break;
  case PN_TRANSPORT_CLOSED:
    if (!app->done) fail(app, "transport closed", pn_transport_condition(pn_event_transport(e)));
    break;
  case PN_CONNECTION_REMOTE_CLOSE:
    if (!app->done && !(app->sender && send_complete(app)))
      fail(app, "the peer closed the connection", pn_connection_remote_condition(c));
    if (!(pn_connection_state(c) & PN_LOCAL_CLOSED)) pn_connection_close(c);
    break;
  case PN_SESSION_REMOTE_CLOSE:
    fail(app, "session ended", pn_session_remote_condition(pn_event_session(e)));
    pn_connection_close(c);
    break;
  case PN_LINK_REMOTE_CLOSE:
  case PN_LINK_REMOTE_DETACH:
    fail(app, "link detached", pn_link_remote_condition(pn_event_link(e)));
    pn_connection_close(c);
    break;
  case PN_LISTENER_CLOSE:
    app->listener = NULL;
    break;
  case PN_PROACTOR_INACTIVE:
    return 0;
  default:
    break;
  }
  if (app->failed && !app->done) {
    app->done = 1;
    close_all(app);
  }
  return 1;
}

static void usage(void) {
  fprintf(stderr, "usage: arrow send|receive --port P [options of bench/arrows/spec.py]\n");
  exit(2);
}

int main(int argc, char **argv) {
  app_t app = {0};
  if (argc < 2) usage();
  if (!strcmp(argv[1], "send")) app.sender = 1;
  else if (strcmp(argv[1], "receive")) usage();
  app.host = "127.0.0.1"; app.port = "5672"; app.address = "arrows"; app.user = "";
  app.password = ""; app.out = ""; app.credit = 1000; app.connections = 1; app.links = 1;
  app.senders = 1; app.body_size = 100; app.timeout = 300;
  for (int i = 2; i < argc; ++i) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(o, "--listen")) { app.listen = 1; continue; }
    if (!strcmp(o, "--presettled")) { app.presettled = 1; continue; }
    if (!strcmp(o, "--durable")) { app.durable = 1; continue; }
    if (!v) usage();
    ++i;
    if (!strcmp(o, "--host")) app.host = v;
    else if (!strcmp(o, "--port")) app.port = v;
    else if (!strcmp(o, "--address")) app.address = v;
    else if (!strcmp(o, "--user")) app.user = v;
    else if (!strcmp(o, "--password")) app.password = v;
    else if (!strcmp(o, "--out")) app.out = v;
    else if (!strcmp(o, "--count")) app.count = atoll(v);
    else if (!strcmp(o, "--rate")) app.rate = atoll(v);
    else if (!strcmp(o, "--max-unsettled")) app.max_unsettled = atoll(v);
    else if (!strcmp(o, "--duration")) app.duration = atof(v);
    else if (!strcmp(o, "--timeout")) app.timeout = atof(v);
    else if (!strcmp(o, "--body-size")) app.body_size = atol(v);
    else if (!strcmp(o, "--credit")) app.credit = atoi(v);
    else if (!strcmp(o, "--connections")) app.connections = atoi(v);
    else if (!strcmp(o, "--links")) app.links = atoi(v);
    else if (!strcmp(o, "--senders")) app.senders = atoi(v);
    else usage();
  }
  if (app.body_size < 16) app.body_size = 16;
  if (app.connections < 1 || app.connections > MAX_CONNECTIONS) usage();
  app.body = calloc(1, app.body_size);
  app.message = pn_message();
  app.proactor = pn_proactor();
  app.deadline_ns = now_ns() + (int64_t)(app.timeout * 1e9);
  char addr[PN_MAX_ADDR];
  pn_proactor_addr(addr, sizeof(addr), app.host, app.port);
  if (app.listen) {
    app.listener = pn_listener();
    pn_proactor_listen(app.proactor, app.listener, addr, 64);
  } else {
    for (int i = 0; i < app.connections; ++i) {
      pn_connection_t *c = pn_connection();
      app.conns[app.nconns++] = c;
      pn_proactor_connect2(app.proactor, c, NULL, addr);
    }
  }
  pn_proactor_set_timeout(app.proactor, 50);
  int running = 1;
  while (running) {
    pn_event_batch_t *events = pn_proactor_wait(app.proactor);
    for (pn_event_t *e = pn_event_batch_next(events); e; e = pn_event_batch_next(events)) {
      if (!handle(&app, e)) { running = 0; break; }
    }
    pn_proactor_done(app.proactor, events);
  }
  if (!app.sender && app.out[0]) {
    FILE *f = fopen(app.out, "wb");
    if (!f || fwrite(app.records, sizeof(int64_t), app.nrecords, f) != app.nrecords) {
      perror(app.out);
      return 1;
    }
    fclose(f);
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  printf("{\"arrow\": \"c\", \"role\": \"%s\"", app.sender ? "send" : "receive");
  if (app.sender)
    printf(", \"sent\": %lld, \"accepted\": %lld, \"start_ns\": %lld, \"end_ns\": %lld", app.sent,
           app.accepted, (long long)app.start_ns, (long long)app.end_ns);
  else
    printf(", \"received\": %lld", app.received);
  if (app.failed) {
    for (char *p = app.error; *p; ++p) if (*p == '"' || *p == '\\' || *p < 32) *p = ' ';
    printf(", \"error\": \"%s\"", app.error);
  }
  printf(", \"cpu_s\": %.6f, \"max_rss_kib\": %ld}\n", cpu, ru.ru_maxrss);
  pn_proactor_free(app.proactor);
  return app.failed ? 3 : 0;
}
