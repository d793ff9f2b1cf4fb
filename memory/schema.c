/* schema.c: the memory database's schema as a list of forward migrations,
 * one per version; a released migration is never edited, only appended to. */
#include "memory/memory_int.h"

/* 0 -> 1: episodes with their tool calls, memories, FTS5 indexes kept in
 * step by triggers (external content: the text is stored once). */
static const char v1[] =
    "CREATE TABLE episodes ("
    "  id INTEGER PRIMARY KEY,"
    "  started_at INTEGER NOT NULL,"
    "  finished_at INTEGER NOT NULL,"
    "  request TEXT NOT NULL,"
    "  messages TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(messages)),"
    "  outcome TEXT,"
    "  model TEXT,"
    "  adapter TEXT,"
    "  verdict INTEGER NOT NULL DEFAULT 0 CHECK (verdict BETWEEN 0 AND 3),"
    "  corrected TEXT);"
    "CREATE INDEX episodes_finished ON episodes(finished_at);"
    "CREATE TABLE tool_calls ("
    "  episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  arguments TEXT NOT NULL,"
    "  result TEXT,"
    "  status INTEGER NOT NULL DEFAULT 0,"
    "  confirmed INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (episode_id, seq)) WITHOUT ROWID;"
    "CREATE TABLE memories ("
    "  id INTEGER PRIMARY KEY,"
    "  kind TEXT NOT NULL,"
    "  text TEXT NOT NULL,"
    "  norm TEXT NOT NULL,"
    "  episode_id INTEGER REFERENCES episodes(id) ON DELETE SET NULL,"
    "  created_at INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL,"
    "  use_count INTEGER NOT NULL DEFAULT 0,"
    "  last_used_at INTEGER);"
    "CREATE INDEX memories_kind_norm ON memories(kind, norm);"
    "CREATE INDEX memories_episode ON memories(episode_id);"
    "CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories',"
    "  content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');"
    "CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN"
    "  INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text); END;"
    "CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN"
    "  INSERT INTO memories_fts(memories_fts, rowid, text)"
    "  VALUES ('delete', old.id, old.text); END;"
    "CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN"
    "  INSERT INTO memories_fts(memories_fts, rowid, text)"
    "  VALUES ('delete', old.id, old.text);"
    "  INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text); END;"
    "CREATE VIRTUAL TABLE episodes_fts USING fts5(request, outcome, corrected,"
    "  content='episodes', content_rowid='id',"
    "  tokenize='porter unicode61 remove_diacritics 2');"
    "CREATE TRIGGER episodes_ai AFTER INSERT ON episodes BEGIN"
    "  INSERT INTO episodes_fts(rowid, request, outcome, corrected)"
    "  VALUES (new.id, new.request, new.outcome, new.corrected); END;"
    "CREATE TRIGGER episodes_ad AFTER DELETE ON episodes BEGIN"
    "  INSERT INTO episodes_fts(episodes_fts, rowid, request, outcome, corrected)"
    "  VALUES ('delete', old.id, old.request, old.outcome, old.corrected); END;"
    "CREATE TRIGGER episodes_au AFTER UPDATE OF request, outcome, corrected"
    "  ON episodes BEGIN"
    "  INSERT INTO episodes_fts(episodes_fts, rowid, request, outcome, corrected)"
    "  VALUES ('delete', old.id, old.request, old.outcome, old.corrected);"
    "  INSERT INTO episodes_fts(rowid, request, outcome, corrected)"
    "  VALUES (new.id, new.request, new.outcome, new.corrected); END;";

/* 1 -> 2: memory expiry, the time of the verdict, and the views the
 * nightly job selects its training data with in one query. */
static const char v2[] =
    "ALTER TABLE memories ADD COLUMN expires_at INTEGER;"
    "ALTER TABLE episodes ADD COLUMN verdict_at INTEGER;"
    "CREATE INDEX memories_expires ON memories(expires_at)"
    "  WHERE expires_at IS NOT NULL;"
    "CREATE INDEX episodes_training ON episodes(verdict, finished_at);"
    "CREATE VIEW episodes_full AS SELECT e.id, e.started_at, e.finished_at,"
    "  e.request, e.messages, e.outcome, e.model, e.adapter, e.verdict,"
    "  e.corrected, e.verdict_at,"
    "  (SELECT json_group_array(json_object('name', c.name,"
    "     'arguments', c.arguments, 'result', c.result, 'status', c.status,"
    "     'confirmed', c.confirmed))"
    "   FROM tool_calls c WHERE c.episode_id = e.id) AS calls"
    "  FROM episodes e;"
    "CREATE VIEW training_episodes AS"
    "  SELECT * FROM episodes_full WHERE verdict IN (1, 2);";

/* 2 -> 3: the audit trail of tool calls (every call, its arguments, the
 * policy's decision and who made it, how it ended), which lived only in a
 * JSON-lines file before the memory database existed. */
static const char v3[] =
    "CREATE TABLE audit(id INTEGER PRIMARY KEY, at INTEGER NOT NULL,"
    "  tool TEXT NOT NULL, effect TEXT, args TEXT, decision TEXT, by TEXT,"
    "  status TEXT, detail TEXT, sandbox TEXT);"
    "CREATE INDEX audit_at ON audit(at);";

/* 3 -> 4: where each memory's words came from (hx_mem_provenance): 0 the
 * user's own conversation, 1 written while untrusted content was in it.
 * Rows from before are NULL, unknown, and count as untrusted: a memory
 * laundered from a mail before provenance was kept stays caught. */
static const char v4[] = "ALTER TABLE memories ADD COLUMN provenance INTEGER;";

/* 4 -> 5: the memories' full-text index is of norm, their words folded
 * (hx_fold: case, accents, "ß" as ss), as every search of Hearth folds;
 * store.c refolds the norms written before (mem_refold). */
static const char v5[] =
    "DROP TRIGGER memories_ai; DROP TRIGGER memories_ad; DROP TRIGGER memories_au;"
    "DROP TABLE memories_fts;"
    "CREATE VIRTUAL TABLE memories_fts USING fts5(norm, content='memories',"
    "  content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');"
    "CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN"
    "  INSERT INTO memories_fts(rowid, norm) VALUES (new.id, new.norm); END;"
    "CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN"
    "  INSERT INTO memories_fts(memories_fts, rowid, norm)"
    "  VALUES ('delete', old.id, old.norm); END;"
    "CREATE TRIGGER memories_au AFTER UPDATE OF norm ON memories BEGIN"
    "  INSERT INTO memories_fts(memories_fts, rowid, norm)"
    "  VALUES ('delete', old.id, old.norm);"
    "  INSERT INTO memories_fts(rowid, norm) VALUES (new.id, new.norm); END;"
    "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');";

/* 5 -> 6: the governor's decisions during each episode (a JSON array of
 * {"slice", "turn", "why", "choice"}; NULL: none recorded), in the views
 * too (a view lists its columns: they are made again). */
static const char v6[] =
    "ALTER TABLE episodes ADD COLUMN governor TEXT;"
    "DROP VIEW training_episodes; DROP VIEW episodes_full;"
    "CREATE VIEW episodes_full AS SELECT e.id, e.started_at, e.finished_at,"
    "  e.request, e.messages, e.outcome, e.model, e.adapter, e.verdict,"
    "  e.corrected, e.verdict_at,"
    "  (SELECT json_group_array(json_object('name', c.name,"
    "     'arguments', c.arguments, 'result', c.result, 'status', c.status,"
    "     'confirmed', c.confirmed))"
    "   FROM tool_calls c WHERE c.episode_id = e.id) AS calls, e.governor"
    "  FROM episodes e;"
    "CREATE VIEW training_episodes AS"
    "  SELECT * FROM episodes_full WHERE verdict IN (1, 2);";

const char *const hx_mem_migrations[HX_MEMORY_SCHEMA_VERSION] = {v1, v2, v3, v4, v5, v6};
