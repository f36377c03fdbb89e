/*
 * ferry-dds: the few Cyclone DDS (0.10) calls ferry makes, and a type that
 * carries serialized CDR as it is (a "blob" sertype): ferry already holds
 * every sample as CDR with its encapsulation header, so Cyclone never needs
 * to know the fields. Types are keyless (every ROS 2 message is).
 *
 * Memory: a blob serdata owns one malloc'd copy of the serialized sample,
 * encapsulation header included, padded with zeros to a multiple of 4
 * (Cyclone's transmit path reads the payload rounded up to 4). dds_writecdr
 * consumes the reference it is given; samples from dds_takecdr are
 * unreferenced after ferry has copied them.
 *
 * Cyclone's generic code calls print, get_keyhash, from_keyhash, to_untyped
 * and eqkey without checking for NULL: all are here. The type is keyless
 * (TOPICKIND_NO_KEY: Fast DDS matches only equal topic kinds), XCDR1 only
 * (what ROS 2's RMWs write), without type information (matching is then by
 * type name, as between ROS 2's RMWs), and never derived.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dds/dds.h"
#include "dds/ddsi/ddsi_serdata.h"
#include "dds/ddsi/ddsi_sertype.h"
#include "dds/ddsi/q_radmin.h"

/* ------------------------------------------------------------ the types */

/* What dds_write/dds_take would see with a blob topic (ferry uses the CDR
 * calls; the sample ops exist so that every path through Cyclone works). */
typedef struct ferry_dds_blob_sample {
  unsigned char *data;
  size_t len;
} ferry_dds_blob_sample;

struct blob_type {
  struct ddsi_sertype c;
};

struct blob {
  struct ddsi_serdata c;
  size_t len;
  unsigned char *data;
};

static const struct ddsi_serdata_ops blob_ops;

static struct blob *blob_new(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, size_t len)
{
  struct blob *d = calloc(1, sizeof(*d));
  if (d == NULL)
    return NULL;
  if (len > 0) {
    /* Zeroed, and padded to 4: Cyclone reads up to the next multiple. */
    d->data = calloc(1, (len + 3) & ~(size_t)3);
    if (d->data == NULL) {
      free(d);
      return NULL;
    }
  }
  d->len = len;
  /* Keyless: the hash stays 0 (every sample is the one instance). */
  ddsi_serdata_init(&d->c, type, kind);
  return d;
}

/* ------------------------------------------------------- serdata ops */

static bool blob_eqkey(const struct ddsi_serdata *a, const struct ddsi_serdata *b)
{
  (void)a;
  (void)b;
  return true;
}

static uint32_t blob_get_size(const struct ddsi_serdata *dcmn)
{
  const struct blob *d = (const struct blob *)dcmn;
  return (uint32_t)d->len;
}

static struct ddsi_serdata *blob_from_ser(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind,
                                          const struct nn_rdata *fragchain, size_t size)
{
  struct blob *d = blob_new(type, kind, size);
  if (d == NULL)
    return NULL;
  /* Fragments arrive in order of offset and may overlap: copy what each
   * adds beyond what is already there. */
  uint32_t off = 0;
  while (fragchain != NULL && off < size) {
    if (fragchain->min > off)
      break; /* a gap (Cyclone's defragmenter never makes one): refused below */
    if (fragchain->maxp1 > off) {
      const unsigned char *payload =
          NN_RMSG_PAYLOADOFF(fragchain->rmsg, NN_RDATA_PAYLOAD_OFF(fragchain));
      uint32_t end = fragchain->maxp1 < size ? fragchain->maxp1 : (uint32_t)size;
      memcpy(d->data + off, payload + (off - fragchain->min), end - off);
      off = end;
    }
    fragchain = fragchain->nextfrag;
  }
  if (off != size) {
    ddsi_serdata_unref(&d->c);
    return NULL;
  }
  return &d->c;
}

static struct ddsi_serdata *blob_from_ser_iov(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind,
                                              ddsrt_msg_iovlen_t niov, const ddsrt_iovec_t *iov, size_t size)
{
  struct blob *d = blob_new(type, kind, size);
  if (d == NULL)
    return NULL;
  size_t off = 0;
  for (ddsrt_msg_iovlen_t i = 0; i < niov && off < size; i++) {
    size_t n = iov[i].iov_len < size - off ? iov[i].iov_len : size - off;
    memcpy(d->data + off, iov[i].iov_base, n);
    off += n;
  }
  d->len = off;
  return &d->c;
}

static struct ddsi_serdata *blob_from_keyhash(const struct ddsi_sertype *type, const struct ddsi_keyhash *keyhash)
{
  (void)keyhash;
  struct blob *d = blob_new(type, SDK_KEY, 0);
  return d != NULL ? &d->c : NULL;
}

static struct ddsi_serdata *blob_from_sample(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind,
                                             const void *sample)
{
  const ferry_dds_blob_sample *s = sample;
  size_t len = kind == SDK_DATA ? s->len : 0;
  struct blob *d = blob_new(type, kind, len);
  if (d == NULL)
    return NULL;
  if (len > 0)
    memcpy(d->data, s->data, len);
  return &d->c;
}

static void blob_to_ser(const struct ddsi_serdata *dcmn, size_t off, size_t sz, void *buf)
{
  const struct blob *d = (const struct blob *)dcmn;
  const size_t padded = (d->len + 3) & ~(size_t)3;
  if (off < padded)
    memcpy(buf, d->data + off, sz <= padded - off ? sz : padded - off);
}

static struct ddsi_serdata *blob_to_ser_ref(const struct ddsi_serdata *dcmn, size_t off, size_t sz,
                                            ddsrt_iovec_t *ref)
{
  const struct blob *d = (const struct blob *)dcmn;
  ref->iov_base = d->data + off;
  ref->iov_len = (ddsrt_iov_len_t)sz;
  return ddsi_serdata_ref(dcmn);
}

static void blob_to_ser_unref(struct ddsi_serdata *dcmn, const ddsrt_iovec_t *ref)
{
  (void)ref;
  ddsi_serdata_unref(dcmn);
}

static bool blob_to_sample(const struct ddsi_serdata *dcmn, void *sample, void **bufptr, void *buflim)
{
  (void)bufptr;
  (void)buflim;
  const struct blob *d = (const struct blob *)dcmn;
  ferry_dds_blob_sample *s = sample;
  unsigned char *copy = d->len > 0 ? realloc(s->data, d->len) : s->data;
  if (d->len > 0 && copy == NULL)
    return false;
  if (d->len > 0)
    memcpy(copy, d->data, d->len);
  s->data = copy;
  s->len = d->len;
  return true;
}

static struct ddsi_serdata *blob_to_untyped(const struct ddsi_serdata *dcmn)
{
  struct blob *d = blob_new(dcmn->type, SDK_KEY, 0);
  if (d == NULL)
    return NULL;
  d->c.type = NULL;
  return &d->c;
}

static bool blob_untyped_to_sample(const struct ddsi_sertype *type, const struct ddsi_serdata *d, void *sample,
                                   void **bufptr, void *buflim)
{
  (void)type;
  (void)d;
  (void)bufptr;
  (void)buflim;
  ferry_dds_blob_sample *s = sample;
  s->len = 0;
  return true;
}

static void blob_free(struct ddsi_serdata *dcmn)
{
  struct blob *d = (struct blob *)dcmn;
  free(d->data);
  free(d);
}

static size_t blob_print(const struct ddsi_sertype *type, const struct ddsi_serdata *dcmn, char *buf, size_t size)
{
  (void)type;
  const struct blob *d = (const struct blob *)dcmn;
  int n = snprintf(buf, size, "(%zu bytes of CDR)", d->len);
  return n < 0 ? 0 : (size_t)n;
}

static void blob_get_keyhash(const struct ddsi_serdata *d, struct ddsi_keyhash *buf, bool force_md5)
{
  (void)d;
  (void)force_md5;
  memset(buf->value, 0, sizeof(buf->value));
}

static const struct ddsi_serdata_ops blob_ops = {
  .eqkey = blob_eqkey,
  .get_size = blob_get_size,
  .from_ser = blob_from_ser,
  .from_ser_iov = blob_from_ser_iov,
  .from_keyhash = blob_from_keyhash,
  .from_sample = blob_from_sample,
  .to_ser = blob_to_ser,
  .to_ser_ref = blob_to_ser_ref,
  .to_ser_unref = blob_to_ser_unref,
  .to_sample = blob_to_sample,
  .to_untyped = blob_to_untyped,
  .untyped_to_sample = blob_untyped_to_sample,
  .free = blob_free,
  .print = blob_print,
  .get_keyhash = blob_get_keyhash,
};

/* -------------------------------------------------------- sertype ops */

static void blob_type_free(struct ddsi_sertype *tpcmn)
{
  ddsi_sertype_fini(tpcmn);
  free(tpcmn);
}

static void blob_zero_samples(const struct ddsi_sertype *d, void *samples, size_t count)
{
  (void)d;
  memset(samples, 0, count * sizeof(ferry_dds_blob_sample));
}

static void blob_realloc_samples(void **ptrs, const struct ddsi_sertype *d, void *old, size_t oldcount, size_t count)
{
  (void)d;
  const size_t size = sizeof(ferry_dds_blob_sample);
  char *new = (oldcount == count) ? old : realloc(old, size * count);
  if (new != NULL && count > oldcount)
    memset(new + size * oldcount, 0, size * (count - oldcount));
  for (size_t i = 0; i < count; i++)
    ptrs[i] = new != NULL ? new + i * size : NULL;
}

static void blob_free_samples(const struct ddsi_sertype *d, void **ptrs, size_t count, dds_free_op_t op)
{
  (void)d;
  if (count == 0 || ptrs[0] == NULL)
    return;
  if (op & DDS_FREE_CONTENTS_BIT) {
    for (size_t i = 0; i < count; i++) {
      ferry_dds_blob_sample *s = ptrs[i];
      free(s->data);
      s->data = NULL;
      s->len = 0;
    }
  }
  if (op & DDS_FREE_ALL_BIT)
    free(ptrs[0]);
}

static bool blob_type_equal(const struct ddsi_sertype *a, const struct ddsi_sertype *b)
{
  /* Cyclone has compared the ops and the type names already. */
  (void)a;
  (void)b;
  return true;
}

static uint32_t blob_type_hash(const struct ddsi_sertype *tp)
{
  (void)tp;
  return 0;
}

static const struct ddsi_sertype_ops blob_type_ops = {
  .version = ddsi_sertype_v0,
  .arg = NULL,
  .free = blob_type_free,
  .zero_samples = blob_zero_samples,
  .realloc_samples = blob_realloc_samples,
  .free_samples = blob_free_samples,
  .equal = blob_type_equal,
  .hash = blob_type_hash,
  .type_id = NULL,
  .type_map = NULL,
  .type_info = NULL,
  .derive_sertype = NULL,
  /* NULL: with these Cyclone may route a type through shared memory
   * (iceoryx) when configured; ferry has its own. */
  .get_serialized_size = NULL,
  .serialize_into = NULL,
};

/* ------------------------------------------------- what ferry calls */

/* The QoS ferry sets, flat (no pointers into Rust beyond the call). */
typedef struct ferry_dds_qos {
  int32_t reliable;        /* 1 reliable, 0 best effort */
  int32_t transient_local; /* 1 transient local, 0 volatile */
  int32_t keep_all;        /* 1 keep all, 0 keep last `depth` */
  int32_t depth;
  int64_t max_blocking_ns; /* reliable writers: how long a write may block */
  int64_t deadline_ns;     /* < 0: infinite */
  int64_t lifespan_ns;     /* < 0: infinite */
  int32_t liveliness;      /* 0 automatic, 1 manual by participant, 2 manual by topic */
  int64_t lease_ns;        /* < 0: infinite */
  const unsigned char *user_data; /* NULL: none */
  size_t user_data_len;
} ferry_dds_qos;

static dds_duration_t dur(int64_t ns)
{
  return ns < 0 ? DDS_INFINITY : (dds_duration_t)ns;
}

static dds_qos_t *make_qos(const ferry_dds_qos *q)
{
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, q->reliable ? DDS_RELIABILITY_RELIABLE : DDS_RELIABILITY_BEST_EFFORT,
                       dur(q->max_blocking_ns));
  dds_qset_durability(qos, q->transient_local ? DDS_DURABILITY_TRANSIENT_LOCAL : DDS_DURABILITY_VOLATILE);
  const dds_history_kind_t hist = q->keep_all ? DDS_HISTORY_KEEP_ALL : DDS_HISTORY_KEEP_LAST;
  const int32_t depth = q->depth > 0 ? q->depth : 1;
  dds_qset_history(qos, hist, depth);
  /* What a transient-local writer keeps for late joiners is its durability
   * service's history (Cyclone's default: keep last 1), as rmw_cyclonedds
   * sets it. */
  if (q->transient_local)
    dds_qset_durability_service(qos, 0, hist, depth, DDS_LENGTH_UNLIMITED, DDS_LENGTH_UNLIMITED,
                                DDS_LENGTH_UNLIMITED);
  dds_qset_deadline(qos, dur(q->deadline_ns));
  dds_qset_lifespan(qos, dur(q->lifespan_ns));
  dds_liveliness_kind_t kind = q->liveliness == 1   ? DDS_LIVELINESS_MANUAL_BY_PARTICIPANT
                               : q->liveliness == 2 ? DDS_LIVELINESS_MANUAL_BY_TOPIC
                                                    : DDS_LIVELINESS_AUTOMATIC;
  dds_qset_liveliness(qos, kind, dur(q->lease_ns));
  /* ROS 2 payloads are XCDR1 (encapsulation CDR_LE/CDR_BE). */
  dds_data_representation_id_t xcdr1 = DDS_DATA_REPRESENTATION_XCDR1;
  dds_qset_data_representation(qos, 1, &xcdr1);
  /* No dispose when a writer goes (as the RMWs); ferry delivers within the
   * process itself. */
  dds_qset_writer_data_lifecycle(qos, false);
  dds_qset_ignorelocal(qos, DDS_IGNORELOCAL_PARTICIPANT);
  if (q->user_data != NULL)
    dds_qset_userdata(qos, q->user_data, q->user_data_len);
  return qos;
}

/* Creates `domain` in this process with the largest sample a peer may
 * send (Cyclone's default is 2 GiB, held up to three times while it is
 * reassembled and handed over), the user's own CYCLONEDDS_URI on top.
 * PRECONDITION_NOT_MET: it exists already. */
dds_entity_t ferry_dds_domain(uint32_t domain, uint32_t max_sample_bytes, const char *extra)
{
  const char *uri = getenv("CYCLONEDDS_URI");
  if (extra == NULL)
    extra = "";
  size_t n = 128 + strlen(extra) + (uri != NULL ? strlen(uri) : 0);
  char *cfg = malloc(n);
  if (cfg == NULL)
    return DDS_RETCODE_OUT_OF_RESOURCES;
  snprintf(cfg, n, "<Internal><MaxSampleSize>%uB</MaxSampleSize></Internal>%s%s%s", (unsigned)max_sample_bytes,
           extra, uri != NULL && *uri != 0 ? "," : "", uri != NULL ? uri : "");
  dds_entity_t dom = dds_create_domain((dds_domainid_t)domain, cfg);
  free(cfg);
  return dom;
}

dds_entity_t ferry_dds_participant(uint32_t domain, const unsigned char *user_data, size_t user_data_len)
{
  dds_qos_t *qos = dds_create_qos();
  if (user_data != NULL)
    dds_qset_userdata(qos, user_data, user_data_len);
  dds_entity_t pp = dds_create_participant((dds_domainid_t)domain, qos, NULL);
  dds_delete_qos(qos);
  return pp;
}

/* Creates the topic with a blob type of `type_name`; `*sertype` is the type
 * the topic actually uses (the writer's samples are made of it). */
dds_entity_t ferry_dds_topic(dds_entity_t pp, const char *topic_name, const char *type_name,
                             const struct ddsi_sertype **sertype)
{
  struct blob_type *t = calloc(1, sizeof(*t));
  if (t == NULL)
    return DDS_RETCODE_OUT_OF_RESOURCES;
  ddsi_sertype_init_flags(&t->c, type_name, &blob_type_ops, &blob_ops, DDSI_SERTYPE_FLAG_TOPICKIND_NO_KEY);
  t->c.allowed_data_representation = DDS_DATA_REPRESENTATION_FLAG_XCDR1;
  struct ddsi_sertype *st = &t->c;
  dds_entity_t tp = dds_create_topic_sertype(pp, topic_name, &st, NULL, NULL, NULL);
  if (tp < 0)
    blob_type_free(&t->c);
  else
    *sertype = st;
  return tp;
}

/* The publisher or subscriber of one writer or reader, deleted with it
 * (`ferry_dds_delete_endpoint`). */
static dds_entity_t make_parent(dds_entity_t pp, bool publisher)
{
  return publisher ? dds_create_publisher(pp, NULL, NULL) : dds_create_subscriber(pp, NULL, NULL);
}

/* How many matched readers a writer has, leaving out those whose user data
 * contains `ignore` (when not empty): kept by the writer's listener. */
typedef struct ferry_dds_match_ctx {
  int32_t count;
  int32_t busy;    /* a spin lock: one count at a time, stored in order */
  char ignore[64]; /* NUL-terminated */
  /* Told of each new count (may be NULL), after it is stored. */
  void (*on_change)(void *ctx, int32_t count);
  void *ctx;
} ferry_dds_match_ctx;

static bool userdata_contains(const dds_qos_t *qos, const char *key)
{
  void *ud = NULL;
  size_t sz = 0;
  bool found = false;
  if (qos != NULL && dds_qget_userdata(qos, &ud, &sz) && ud != NULL)
  {
    const size_t k = strlen(key);
    for (size_t i = 0; k > 0 && i + k <= sz && !found; i++)
      found = memcmp((const char *)ud + i, key, k) == 0;
    dds_free(ud);
  }
  return found;
}

/* Counts `wr`'s matched readers into `c`, from the writer's state now
 * (under the lock: a later count is never overwritten by an earlier one).
 * When the readers cannot be listed (the writer is still being created),
 * all count: a sample too many is dropped by its reader; one too few would
 * be lost. */
static void count_readers(dds_entity_t wr, ferry_dds_match_ctx *c)
{
  while (__atomic_exchange_n(&c->busy, 1, __ATOMIC_ACQUIRE) != 0)
    sched_yield();
  const dds_return_t all = dds_get_matched_subscriptions(wr, NULL, 0);
  int32_t count = all > 0 ? (int32_t)all : 0;
  if (c->ignore[0] != 0 && count > 0)
  {
    enum { MAX = 256 };
    dds_instance_handle_t hs[MAX];
    const dds_return_t n = dds_get_matched_subscriptions(wr, hs, MAX);
    if (n >= 0)
    {
      /* Readers beyond MAX are counted as not ignored. */
      count = n > MAX ? n - MAX : 0;
      for (dds_return_t i = 0; i < n && i < MAX; i++)
      {
        dds_builtintopic_endpoint_t *ep = dds_get_matched_subscription_data(wr, hs[i]);
        if (ep == NULL)
          continue;
        if (!userdata_contains(ep->qos, c->ignore))
          count++;
        dds_builtintopic_free_endpoint(ep);
      }
    }
  }
  const int32_t before = __atomic_exchange_n(&c->count, count, __ATOMIC_RELAXED);
  __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
  if (c->on_change != NULL && before != count)
    c->on_change(c->ctx, count);
}

static void on_publication_matched(dds_entity_t wr, const dds_publication_matched_status_t status, void *arg)
{
  (void)status;
  count_readers(wr, arg);
}

/* Told of an endpoint's QoS conflict with a remote one (DDS's offered /
 * requested incompatible QoS status): the last policy in conflict and how
 * many conflicts so far. Runs on a Cyclone thread. */
typedef void (*ferry_dds_on_incompatible)(void *ctx, dds_entity_t e, uint32_t policy, uint32_t total);

typedef struct ferry_dds_incompatible {
  ferry_dds_on_incompatible cb;
  void *ctx;
} ferry_dds_incompatible;

static void on_offered_incompatible(dds_entity_t wr, const dds_offered_incompatible_qos_status_t status, void *arg)
{
  const ferry_dds_incompatible *i = arg;
  i->cb(i->ctx, wr, status.last_policy_id, status.total_count);
}

static void on_requested_incompatible(dds_entity_t rd, const dds_requested_incompatible_qos_status_t status,
                                      void *arg)
{
  const ferry_dds_incompatible *i = arg;
  i->cb(i->ctx, rd, status.last_policy_id, status.total_count);
}

/* The GUIDs of the endpoints matched with `e` now (readers of a writer,
 * writers of a reader), at most `max` (16 bytes each into `out`); their
 * number, or an error code (e.g. `e` is gone). */
int32_t ferry_dds_matched_guids(dds_entity_t e, int32_t is_writer, unsigned char *out, uint32_t max)
{
  enum { MAX = 1024 };
  dds_instance_handle_t hs[MAX];
  const dds_return_t n = is_writer ? dds_get_matched_subscriptions(e, hs, MAX) : dds_get_matched_publications(e, hs, MAX);
  if (n < 0)
    return n;
  uint32_t k = 0;
  for (dds_return_t i = 0; i < n && i < MAX && k < max; i++)
  {
    dds_builtintopic_endpoint_t *ep =
        is_writer ? dds_get_matched_subscription_data(e, hs[i]) : dds_get_matched_publication_data(e, hs[i]);
    if (ep == NULL)
      continue;
    memcpy(out + 16 * (size_t)k, ep->key.v, 16);
    k++;
    dds_builtintopic_free_endpoint(ep);
  }
  return (int32_t)k;
}

/* A writer; `matched->count` follows its matched readers (written by
 * Cyclone's threads until the writer is deleted; may be NULL); `incompatible`
 * (may be NULL) is told of readers whose QoS conflicts. Both outlive the
 * writer. */
dds_entity_t ferry_dds_writer(dds_entity_t pp, dds_entity_t topic, const ferry_dds_qos *q,
                              ferry_dds_match_ctx *matched, const ferry_dds_incompatible *incompatible)
{
  dds_entity_t pub = make_parent(pp, true);
  if (pub < 0)
    return pub;
  dds_qos_t *qos = make_qos(q);
  dds_listener_t *l = NULL;
  if (matched != NULL || incompatible != NULL)
    l = dds_create_listener(NULL);
  if (matched != NULL)
    dds_lset_publication_matched_arg(l, on_publication_matched, matched, true);
  if (incompatible != NULL)
    dds_lset_offered_incompatible_qos_arg(l, on_offered_incompatible, (void *)incompatible, true);
  dds_entity_t wr = dds_create_writer(pub, topic, qos, l);
  if (l != NULL)
    dds_delete_listener(l);
  dds_delete_qos(qos);
  if (wr < 0)
  {
    dds_delete(pub);
    return wr;
  }
  /* Readers matched while the writer was being created were counted
   * before they could be listed: count them again now. */
  if (matched != NULL)
    count_readers(wr, matched);
  return wr;
}

typedef void (*ferry_dds_on_data)(dds_entity_t reader, void *ctx);

/* A reader: `cb(reader, ctx)` runs when it has data; `incompatible` (may be
 * NULL) is told of writers whose QoS conflicts. Both outlive the reader. */
dds_entity_t ferry_dds_reader(dds_entity_t pp, dds_entity_t topic, const ferry_dds_qos *q, ferry_dds_on_data cb,
                              void *ctx, const ferry_dds_incompatible *incompatible)
{
  dds_entity_t sub = make_parent(pp, false);
  if (sub < 0)
    return sub;
  dds_qos_t *qos = make_qos(q);
  dds_listener_t *l = dds_create_listener(ctx);
  dds_lset_data_available(l, cb);
  if (incompatible != NULL)
    dds_lset_requested_incompatible_qos_arg(l, on_requested_incompatible, (void *)incompatible, true);
  dds_entity_t rd = dds_create_reader(sub, topic, qos, l);
  dds_delete_listener(l);
  dds_delete_qos(qos);
  if (rd < 0)
    dds_delete(sub);
  return rd;
}

/* Writes one sample (source timestamp: now). */
dds_return_t ferry_dds_write(dds_entity_t wr, const struct ddsi_sertype *sertype, const unsigned char *data,
                             size_t len)
{
  struct blob *d = blob_new(sertype, SDK_DATA, len);
  if (d == NULL)
    return DDS_RETCODE_OUT_OF_RESOURCES;
  if (len > 0)
    memcpy(d->data, data, len);
  /* Consumes the reference, except when the writer cannot be locked (gone,
   * or not a writer): then it is still ours. (A content filter would be
   * another such case; ferry sets none.) */
  dds_return_t rc = dds_writecdr(wr, &d->c);
  if (rc == DDS_RETCODE_BAD_PARAMETER || rc == DDS_RETCODE_ILLEGAL_OPERATION || rc == DDS_RETCODE_ALREADY_DELETED)
    ddsi_serdata_unref(&d->c);
  return rc;
}

/* What one taken sample says: its bytes stay valid until ferry_dds_release. */
typedef struct ferry_dds_taken {
  const unsigned char *data;
  size_t len;
  int64_t source_timestamp;
  uint64_t publication_handle;
  int32_t valid_data;
  void *serdata;
} ferry_dds_taken;

/* Takes up to `max` samples; returns how many (or a negative retcode). */
dds_return_t ferry_dds_take(dds_entity_t rd, ferry_dds_taken *out, uint32_t max)
{
  enum { BATCH = 16 };
  struct ddsi_serdata *sd[BATCH];
  dds_sample_info_t si[BATCH];
  if (max > BATCH)
    max = BATCH;
  dds_return_t n = dds_takecdr(rd, sd, max, si, DDS_ANY_STATE);
  for (dds_return_t i = 0; i < n; i++) {
    const struct blob *d = (const struct blob *)sd[i];
    out[i].data = d->data;
    out[i].len = d->len;
    out[i].source_timestamp = si[i].source_timestamp;
    out[i].publication_handle = si[i].publication_handle;
    out[i].valid_data = si[i].valid_data ? 1 : 0;
    out[i].serdata = sd[i];
  }
  return n;
}

void ferry_dds_release(void *serdata)
{
  ddsi_serdata_unref((struct ddsi_serdata *)serdata);
}

/* The matched writer behind `handle`: its GUID, its participant's GUID and
 * its user data (copied up to `cap` bytes; the length is returned). */
dds_return_t ferry_dds_publication(dds_entity_t rd, uint64_t handle, unsigned char guid[16],
                                   unsigned char participant[16], unsigned char *user_data, size_t cap)
{
  dds_builtintopic_endpoint_t *ep = dds_get_matched_publication_data(rd, handle);
  if (ep == NULL)
    return DDS_RETCODE_BAD_PARAMETER;
  memcpy(guid, ep->key.v, 16);
  memcpy(participant, ep->participant_key.v, 16);
  void *ud = NULL;
  size_t sz = 0;
  dds_return_t len = 0;
  if (ep->qos != NULL && dds_qget_userdata(ep->qos, &ud, &sz) && ud != NULL) {
    memcpy(user_data, ud, sz < cap ? sz : cap);
    len = (dds_return_t)sz;
    dds_free(ud);
  }
  dds_builtintopic_free_endpoint(ep);
  return len;
}

/* A reader of the participant's discovered writers (`writers` != 0) or
 * readers: DDS's built-in DCPSPublication / DCPSSubscription topic. */
dds_entity_t ferry_dds_builtin_reader(dds_entity_t pp, int32_t writers)
{
  return dds_create_reader(pp, writers ? DDS_BUILTIN_TOPIC_DCPSPUBLICATION : DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION,
                           NULL, NULL);
}

/* One discovered endpoint, as `ferry_dds_endpoints` hands it over (valid
 * for the call only). */
typedef struct ferry_dds_endpoint {
  const char *topic;
  const char *type_name;
  const unsigned char *guid;        /* 16 bytes */
  const unsigned char *participant; /* 16 bytes */
  const unsigned char *user_data;
  size_t user_data_len;
} ferry_dds_endpoint;

typedef void (*ferry_dds_on_endpoint)(void *ctx, const ferry_dds_endpoint *ep);

/* Calls `cb` for every endpoint alive in built-in reader `rd` (at most
 * `max`); returns how many, or an error. */
dds_return_t ferry_dds_endpoints(dds_entity_t rd, uint32_t max, ferry_dds_on_endpoint cb, void *ctx)
{
  if (max == 0)
    return 0;
  void **buf = calloc(max, sizeof(*buf));
  dds_sample_info_t *info = calloc(max, sizeof(*info));
  if (buf == NULL || info == NULL)
  {
    free(buf);
    free(info);
    return DDS_RETCODE_OUT_OF_RESOURCES;
  }
  /* Endpoints that went away: taken, so Cyclone frees their instances
   * (what a peer's churn leaves stays bounded). */
  dds_return_t gone;
  do
  {
    gone = dds_take_mask(rd, buf, info, max, max,
                         DDS_ANY_SAMPLE_STATE | DDS_ANY_VIEW_STATE | DDS_NOT_ALIVE_DISPOSED_INSTANCE_STATE |
                             DDS_NOT_ALIVE_NO_WRITERS_INSTANCE_STATE);
    if (gone > 0)
      dds_return_loan(rd, buf, gone);
    buf[0] = NULL;
  } while (gone == (dds_return_t)max);
  const dds_return_t n =
      dds_read_mask(rd, buf, info, max, max, DDS_ANY_SAMPLE_STATE | DDS_ANY_VIEW_STATE | DDS_ALIVE_INSTANCE_STATE);
  for (dds_return_t i = 0; i < n; i++)
  {
    const dds_builtintopic_endpoint_t *e = buf[i];
    if (!info[i].valid_data || e == NULL || e->topic_name == NULL || e->type_name == NULL)
      continue;
    void *ud = NULL;
    size_t sz = 0;
    if (e->qos == NULL || !dds_qget_userdata(e->qos, &ud, &sz))
      ud = NULL;
    const ferry_dds_endpoint ep = {e->topic_name, e->type_name, e->key.v, e->participant_key.v, ud, ud != NULL ? sz : 0};
    cb(ctx, &ep);
    dds_free(ud);
  }
  if (n > 0)
    dds_return_loan(rd, buf, n);
  free(buf);
  free(info);
  return n;
}

/* This entity's GUID (writers and readers: ROS 2's gid). */
dds_return_t ferry_dds_guid(dds_entity_t e, unsigned char guid[16])
{
  dds_guid_t g;
  dds_return_t rc = dds_get_guid(e, &g);
  if (rc == 0)
    memcpy(guid, g.v, 16);
  return rc;
}

dds_return_t ferry_dds_matched(dds_entity_t e, int32_t is_writer)
{
  if (is_writer) {
    dds_publication_matched_status_t s;
    dds_return_t rc = dds_get_publication_matched_status(e, &s);
    return rc < 0 ? rc : (dds_return_t)s.current_count;
  } else {
    dds_subscription_matched_status_t s;
    dds_return_t rc = dds_get_subscription_matched_status(e, &s);
    return rc < 0 ? rc : (dds_return_t)s.current_count;
  }
}

const char *ferry_dds_strretcode(dds_return_t rc)
{
  return dds_strretcode(rc);
}

dds_return_t ferry_dds_delete(dds_entity_t e)
{
  return dds_delete(e);
}

/* Deletes a writer or reader made by ferry_dds_writer / _reader with its
 * own publisher or subscriber (which deletes the endpoint with it, waiting
 * for a listener that runs). */
dds_return_t ferry_dds_delete_endpoint(dds_entity_t e)
{
  dds_entity_t parent = dds_get_parent(e);
  return dds_delete(parent < 0 ? e : parent);
}

/* Cyclone's log messages (errors, warnings, info; not its trace) go to
 * `ferry_dds_log_cb` instead of stderr: ferry logs them with its own
 * tracing, bounded (a peer sending malformed packets makes Cyclone warn
 * once per packet). */
typedef void (*ferry_dds_on_log)(uint32_t priority, const char *msg, size_t len);

static ferry_dds_on_log ferry_dds_log_cb;

/* `message` starts after Cyclone's header (time stamp, domain, thread). */
static void log_sink(void *arg, const dds_log_data_t *d)
{
  (void)arg;
  const ferry_dds_on_log cb = __atomic_load_n(&ferry_dds_log_cb, __ATOMIC_ACQUIRE);
  if (cb == NULL || d->message == NULL)
    return;
  cb(d->priority, d->message, d->size);
}

void ferry_dds_set_log(ferry_dds_on_log cb)
{
  __atomic_store_n(&ferry_dds_log_cb, cb, __ATOMIC_RELEASE);
  dds_set_log_sink(log_sink, NULL);
}

/* Write batching for every writer of the process (Cyclone packs samples
 * into one datagram until it is full or flushed), as ddsperf's pub. */
void ferry_dds_write_batch(int32_t enable)
{
  dds_write_set_batch(enable != 0);
}

void ferry_dds_flush(dds_entity_t wr)
{
  dds_write_flush(wr);
}
