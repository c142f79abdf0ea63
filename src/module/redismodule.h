/*
 * redismodule.h - the part of the Redis module API that sluice.so uses, written from the
 * documented API (https://redis.io/docs/reference/modules/modules-api-ref/). Every function
 * here exists in Redis 6.2.2 and later (Debian 12 ships 7.0.15), except RedisModule_GetCommand and
 * RedisModule_SetCommandInfo (Redis 7.0: a command's summary, arity and arguments for COMMAND
 * DOCS and COMMAND INFO), which are looked up but may be missing.
 *
 * The ABI: redis-server calls RedisModule_OnLoad(ctx, argv, argc). The first word of the
 * context is a pointer to RedisModule_GetApi(name, &fnptr), which looks a function up by its
 * name ("RedisModule_OpenKey") and stores its address. RedisModule_Init() below does that
 * lookup once for every function this module calls, then registers the module's name.
 * Functions are called through the pointers; no Redis symbol is linked.
 */
#ifndef SLUICE_REDISMODULE_H
#define SLUICE_REDISMODULE_H

#include <stddef.h>
#include <stdint.h>

/* ---- constants (values fixed by the ABI) ------------------------------------------------- */

#define REDISMODULE_OK       0
#define REDISMODULE_ERR      1
#define REDISMODULE_APIVER_1 1

/* RedisModule_OpenKey modes; RedisModule_StringDMA access. */
#define REDISMODULE_READ  (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

/* RedisModule_KeyType results. */
#define REDISMODULE_KEYTYPE_EMPTY  0
#define REDISMODULE_KEYTYPE_STRING 1

/* RedisModule_GetAbsExpire when the key has no expiry. */
#define REDISMODULE_NO_EXPIRE -1

/* RedisModule_SetModuleOptions: the module calls RedisModule_SignalModifiedKey itself, so a
 * key opened for writing but left unchanged (a rejection) does not invalidate WATCH. */
#define REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED (1 << 1)

#define REDISMODULE_ERRORMSG_WRONGTYPE                                                             \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

#define REDISMODULE_LOGLEVEL_NOTICE  "notice"
#define REDISMODULE_LOGLEVEL_WARNING "warning"

/* ---- types ------------------------------------------------------------------------------- */

typedef long long mstime_t;

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;

typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Command descriptions (RedisModule_SetCommandInfo, Redis 7.0): the layouts the API documents,
 * version 1 of RedisModuleCommandInfo. A list of arguments ends with an element of zeros. */
typedef struct RedisModuleCommand RedisModuleCommand;

typedef enum {
    REDISMODULE_ARG_TYPE_STRING = 0,
    REDISMODULE_ARG_TYPE_INTEGER = 1,
    REDISMODULE_ARG_TYPE_DOUBLE = 2,
    REDISMODULE_ARG_TYPE_KEY = 3,
    REDISMODULE_ARG_TYPE_PATTERN = 4,
    REDISMODULE_ARG_TYPE_UNIX_TIME = 5,
    REDISMODULE_ARG_TYPE_PURE_TOKEN = 6,
    REDISMODULE_ARG_TYPE_ONEOF = 7,
    REDISMODULE_ARG_TYPE_BLOCK = 8,
} RedisModuleCommandArgType;

#define REDISMODULE_CMD_ARG_OPTIONAL (1 << 0)
#define REDISMODULE_CMD_ARG_MULTIPLE (1 << 1)

typedef struct RedisModuleCommandArg {
    const char *name;
    RedisModuleCommandArgType type;
    int key_spec_index; /* a key's key spec (0: the first key's), else -1 */
    const char *token;
    const char *summary;
    const char *since;
    int flags; /* REDISMODULE_CMD_ARG_* */
    const char *deprecated_since;
    struct RedisModuleCommandArg *subargs;
    const char *display_text;
} RedisModuleCommandArg;

typedef struct {
    const char *since;
    const char *changes;
} RedisModuleCommandHistoryEntry;

typedef struct {
    const char *notes;
    uint64_t flags;
    int begin_search_type;
    union {
        struct {
            int pos;
        } index;
        struct {
            const char *keyword;
            int startfrom;
        } keyword;
    } bs;
    int find_keys_type;
    union {
        struct {
            int lastkey, keystep, limit;
        } range;
        struct {
            int keynumidx, firstkey, keystep;
        } keynum;
    } fk;
} RedisModuleCommandKeySpec;

typedef struct {
    int version;
    size_t sizeof_historyentry;
    size_t sizeof_keyspec;
    size_t sizeof_arg;
} RedisModuleCommandInfoVersion;

typedef struct {
    const RedisModuleCommandInfoVersion *version;
    const char *summary;
    const char *complexity;
    const char *since;
    RedisModuleCommandHistoryEntry *history;
    const char *tips;
    int arity;                            /* N exactly N arguments with the name, -N at least N */
    RedisModuleCommandKeySpec *key_specs; /* NULL: the first/last/step given at creation */
    RedisModuleCommandArg *args;
} RedisModuleCommandInfo;

static const RedisModuleCommandInfoVersion RedisModule_CommandInfoVersion1 = {
    .version = 1,
    .sizeof_historyentry = sizeof(RedisModuleCommandHistoryEntry),
    .sizeof_keyspec = sizeof(RedisModuleCommandKeySpec),
    .sizeof_arg = sizeof(RedisModuleCommandArg),
};

/* ---- the functions (pointers filled by RedisModule_Init) ---------------------------------- */

#define REDISMODULE_API static

REDISMODULE_API int (*RedisModule_GetApi)(const char *name, void *fnptr);

/* Module and commands. strflags: space-separated "write", "readonly", "deny-oom", "fast"...;
 * firstkey/lastkey/keystep: key positions in argv (0 0 0 for none). */
REDISMODULE_API void (*RedisModule_SetModuleAttribs)(RedisModuleCtx *ctx, const char *name, int ver,
                                                     int apiver);
REDISMODULE_API int (*RedisModule_IsModuleNameBusy)(const char *name);
REDISMODULE_API int (*RedisModule_CreateCommand)(RedisModuleCtx *ctx, const char *name,
                                                 RedisModuleCmdFunc cmdfunc, const char *strflags,
                                                 int firstkey, int lastkey, int keystep);
REDISMODULE_API void (*RedisModule_SetModuleOptions)(RedisModuleCtx *ctx, int options);
/* Redis 7.0 and later (NULL before): a command's description for COMMAND DOCS and INFO. */
REDISMODULE_API RedisModuleCommand *(*RedisModule_GetCommand)(RedisModuleCtx *ctx,
                                                              const char *name);
REDISMODULE_API int (*RedisModule_SetCommandInfo)(RedisModuleCommand *command,
                                                  const RedisModuleCommandInfo *info);
REDISMODULE_API void (*RedisModule_Log)(RedisModuleCtx *ctx, const char *level, const char *fmt,
                                        ...) __attribute__((format(printf, 3, 4)));

/* Memory (counted in Redis's used_memory). */
REDISMODULE_API void *(*RedisModule_Alloc)(size_t bytes);
REDISMODULE_API void *(*RedisModule_Calloc)(size_t nmemb, size_t size);
REDISMODULE_API void (*RedisModule_Free)(void *ptr);

/* Strings passed to commands. */
REDISMODULE_API const char *(*RedisModule_StringPtrLen)(const RedisModuleString *str, size_t *len);

/* Replies. An error text is sent as given ("ERR ..." or "WRONGTYPE ..."). */
/* Replies "ERR wrong number of arguments for '<command>' command". */
REDISMODULE_API int (*RedisModule_WrongArity)(RedisModuleCtx *ctx);
REDISMODULE_API int (*RedisModule_ReplyWithError)(RedisModuleCtx *ctx, const char *err);
REDISMODULE_API int (*RedisModule_ReplyWithSimpleString)(RedisModuleCtx *ctx, const char *msg);
REDISMODULE_API int (*RedisModule_ReplyWithLongLong)(RedisModuleCtx *ctx, long long ll);
REDISMODULE_API int (*RedisModule_ReplyWithArray)(RedisModuleCtx *ctx, long len);

/* Keys. */
REDISMODULE_API RedisModuleKey *(*RedisModule_OpenKey)(RedisModuleCtx *ctx,
                                                       RedisModuleString *keyname, int mode);
REDISMODULE_API void (*RedisModule_CloseKey)(RedisModuleKey *key);
REDISMODULE_API int (*RedisModule_KeyType)(RedisModuleKey *key);
REDISMODULE_API int (*RedisModule_DeleteKey)(RedisModuleKey *key);
/* Direct access to a string value's bytes; WRITE makes the value private to the key first. */
REDISMODULE_API char *(*RedisModule_StringDMA)(RedisModuleKey *key, size_t *len, int mode);
/* Resizes a string value; on an empty key opened for writing, creates a zero-filled string. */
REDISMODULE_API int (*RedisModule_StringTruncate)(RedisModuleKey *key, size_t newlen);
REDISMODULE_API RedisModuleString *(*RedisModule_CreateString)(RedisModuleCtx *ctx, const char *ptr,
                                                               size_t len);
REDISMODULE_API void (*RedisModule_FreeString)(RedisModuleCtx *ctx, RedisModuleString *str);
REDISMODULE_API int (*RedisModule_StringSet)(RedisModuleKey *key, RedisModuleString *str);
REDISMODULE_API mstime_t (*RedisModule_GetAbsExpire)(RedisModuleKey *key);
REDISMODULE_API int (*RedisModule_SetAbsExpire)(RedisModuleKey *key, mstime_t expire);
REDISMODULE_API int (*RedisModule_SignalModifiedKey)(RedisModuleCtx *ctx,
                                                     RedisModuleString *keyname);

/* Replication: sends the command to replicas and the AOF after this command completes. fmt
 * letters: s RedisModuleString *, b buffer + size_t, c C string, l long long. */
REDISMODULE_API int (*RedisModule_Replicate)(RedisModuleCtx *ctx, const char *cmdname,
                                             const char *fmt, ...);

#define REDISMODULE_GET_API(name)                                                                  \
    RedisModule_GetApi("RedisModule_" #name, ((void **)&RedisModule_##name))

/* Looks up every function above; REDISMODULE_ERR if one is missing (a Redis older than
 * 6.2.2) or the name is taken by another loaded module. */
static int RedisModule_Init(RedisModuleCtx *ctx, const char *name, int ver, int apiver)
{
    void *getapifuncptr = ((void **)ctx)[0];
    RedisModule_GetApi = (int (*)(const char *, void *))(uintptr_t)getapifuncptr;
    int missing = 0;
    missing |= REDISMODULE_GET_API(SetModuleAttribs);
    REDISMODULE_GET_API(IsModuleNameBusy); /* optional */
    REDISMODULE_GET_API(GetCommand);       /* optional (7.0) */
    REDISMODULE_GET_API(SetCommandInfo);   /* optional (7.0) */
    missing |= REDISMODULE_GET_API(CreateCommand);
    missing |= REDISMODULE_GET_API(SetModuleOptions);
    missing |= REDISMODULE_GET_API(Log);
    missing |= REDISMODULE_GET_API(Alloc);
    missing |= REDISMODULE_GET_API(Calloc);
    missing |= REDISMODULE_GET_API(Free);
    missing |= REDISMODULE_GET_API(StringPtrLen);
    missing |= REDISMODULE_GET_API(WrongArity);
    missing |= REDISMODULE_GET_API(ReplyWithError);
    missing |= REDISMODULE_GET_API(ReplyWithSimpleString);
    missing |= REDISMODULE_GET_API(ReplyWithLongLong);
    missing |= REDISMODULE_GET_API(ReplyWithArray);
    missing |= REDISMODULE_GET_API(OpenKey);
    missing |= REDISMODULE_GET_API(CloseKey);
    missing |= REDISMODULE_GET_API(KeyType);
    missing |= REDISMODULE_GET_API(DeleteKey);
    missing |= REDISMODULE_GET_API(StringDMA);
    missing |= REDISMODULE_GET_API(StringTruncate);
    missing |= REDISMODULE_GET_API(CreateString);
    missing |= REDISMODULE_GET_API(FreeString);
    missing |= REDISMODULE_GET_API(StringSet);
    missing |= REDISMODULE_GET_API(GetAbsExpire);
    missing |= REDISMODULE_GET_API(SetAbsExpire);
    missing |= REDISMODULE_GET_API(SignalModifiedKey);
    missing |= REDISMODULE_GET_API(Replicate);
    if (missing != REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    if (RedisModule_IsModuleNameBusy != NULL && RedisModule_IsModuleNameBusy(name)) {
        return REDISMODULE_ERR;
    }
    RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
    return REDISMODULE_OK;
}

#endif /* SLUICE_REDISMODULE_H */
