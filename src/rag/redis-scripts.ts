/**
 * The Lua scripts of the knowledge base on Redis (redis-index.ts). Each runs atomically, so every
 * change a reader could see half-done happens in one of them: a segment and its documents are
 * published together with their statistics and the removal of the versions they replace, a
 * delete takes a document and its statistics out at once, a merge swaps segments in one step, and
 * a query reads the statistics, the segment list and the posting blocks from one snapshot.
 *
 * Keys are named from ARGV[1], the deployment's prefix (RedisStorage.key), followed by `rag:`
 * and the names redis-index.ts lists.
 */
import { createHash } from 'node:crypto';

/** A script and its SHA-1 (EVALSHA first, EVAL when Redis no longer knows it, after a restart). */
export interface Script {
  source: string;
  sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/** Helpers every script shares: key names, and removing a document with its statistics. */
const COMMON = `
local p = ARGV[1] .. 'rag:'
local function decr_or_delete(key, field, by)
  local left = redis.call('HINCRBY', key, field, -by)
  if left <= 0 then redis.call('HDEL', key, field) end
  return left
end
local function remove_document(doc)
  local code = redis.call('HGET', p .. 'codes', doc.collection)
  local removed_length = 0
  for chunk = doc.first_chunk, doc.first_chunk + doc.chunks - 1 do
    local record = redis.call('HGET', p .. 'chunks', chunk)
    if record then
      removed_length = removed_length + cjson.decode(record).length
      redis.call('HDEL', p .. 'chunks', chunk)
      redis.call('SADD', p .. 'dead', chunk)
      if code then redis.call('HDEL', p .. 'vecs:' .. code, chunk) end
    end
  end
  local stored = redis.call('HGET', p .. 'doc-terms', doc.terms_key)
  if stored then
    local terms = cjson.decode(stored)
    local index = 1
    for term in string.gmatch(terms.terms, '[^\\n]+') do
      decr_or_delete(p .. 'df', term, terms.counts[index])
      index = index + 1
    end
  end
  redis.call('HDEL', p .. 'docs', doc.id)
  redis.call('HDEL', p .. 'doc-terms', doc.terms_key)
  redis.call('ZREM', p .. 'ids', doc.id)
  redis.call('ZREM', p .. 'by-coll:' .. doc.collection, doc.id)
  if decr_or_delete(p .. 'coll-docs', doc.collection, 1) <= 0 then
    redis.call('HDEL', p .. 'coll-chunks', doc.collection)
  else
    redis.call('HINCRBY', p .. 'coll-chunks', doc.collection, -doc.chunks)
  end
  redis.call('HINCRBY', p .. 'meta', 'documents', -1)
  redis.call('HINCRBY', p .. 'meta', 'chunks', -doc.chunks)
  redis.call('HINCRBY', p .. 'meta', 'total_length', -removed_length)
end
`;

/**
 * Allocates a segment for an ingestion: ARGV[2] collection, ARGV[3] chunks, ARGV[4] the building
 * record's JSON without its numbers, ARGV[5] now (ms). Returns {segment key, first chunk, code}.
 */
export const ALLOCATE = script(`${COMMON}
local code = redis.call('HGET', p .. 'codes', ARGV[2])
if not code then
  code = string.lower(tostring(redis.call('HINCRBY', p .. 'meta', 'collection_sequence', 1)))
  redis.call('HSET', p .. 'codes', ARGV[2], code)
end
local chunks = tonumber(ARGV[3])
local first = redis.call('HINCRBY', p .. 'meta', 'chunk_sequence', chunks) - chunks + 1
local sequence = redis.call('HINCRBY', p .. 'meta', 'segment_sequence', 1)
local record = cjson.decode(ARGV[4])
record.code = code
record.first_chunk = first
record.started = tonumber(ARGV[5])
local digits = '0123456789abcdefghijklmnopqrstuvwxyz'
local key = ''
repeat
  local digit = sequence % 36
  key = string.sub(digits, digit + 1, digit + 1) .. key
  sequence = math.floor(sequence / 36)
until sequence == 0
key = string.rep('0', 8 - string.len(key)) .. key
redis.call('HSET', p .. 'segments', key, cjson.encode(record))
return {key, first, code}
`);

/**
 * Publishes a building segment: ARGV[2] segment, ARGV[3] now (ISO), ARGV[4] chunks added,
 * ARGV[5] token length added, ARGV[6…] the documents' records (JSON). Replaced versions are
 * removed first; the segment's document frequencies (seg-terms) join rag:df. Returns, per
 * document, 1 when it replaced one.
 */
export const PUBLISH = script(`${COMMON}
local segment = ARGV[2]
local stored = redis.call('HGET', p .. 'segments', segment)
if not stored then return redis.error_reply('ERR segment ' .. segment .. ' is no longer being built') end
local record = cjson.decode(stored)
if record.state ~= 'building' then return redis.error_reply('ERR segment ' .. segment .. ' is no longer being built') end
local replaced = {}
local collection
for index = 6, #ARGV do
  local doc = cjson.decode(ARGV[index])
  collection = doc.collection
  local existing = redis.call('HGET', p .. 'docs', doc.id)
  if existing then
    remove_document(cjson.decode(existing))
    replaced[#replaced + 1] = 1
  else
    replaced[#replaced + 1] = 0
  end
  redis.call('HSET', p .. 'docs', doc.id, ARGV[index])
  redis.call('ZADD', p .. 'ids', 0, doc.id)
  redis.call('ZADD', p .. 'by-coll:' .. doc.collection, 0, doc.id)
end
local count = #ARGV - 5
redis.call('HINCRBY', p .. 'coll-docs', collection, count)
redis.call('HINCRBY', p .. 'coll-chunks', collection, tonumber(ARGV[4]))
redis.call('HINCRBY', p .. 'meta', 'documents', count)
redis.call('HINCRBY', p .. 'meta', 'chunks', tonumber(ARGV[4]))
redis.call('HINCRBY', p .. 'meta', 'total_length', tonumber(ARGV[5]))
redis.call('HSET', p .. 'meta', 'last_indexed', ARGV[3])
local terms = redis.call('HGETALL', p .. 'seg-terms:' .. segment)
for index = 1, #terms, 2 do
  redis.call('HINCRBY', p .. 'df', terms[index], tonumber(terms[index + 1]))
end
redis.call('DEL', p .. 'seg-terms:' .. segment)
record.state = 'live'
record.started = nil
record.documents = nil
redis.call('HSET', p .. 'segments', segment, cjson.encode(record))
return replaced
`);

/**
 * Removes documents: ARGV[2] the collection they must be in ('' for any), ARGV[3…] their ids.
 * An id listed in the collection without a document is dropped from the listing. Returns how many
 * documents were removed.
 */
export const REMOVE = script(`${COMMON}
local removed = 0
for index = 3, #ARGV do
  local stored = redis.call('HGET', p .. 'docs', ARGV[index])
  local doc = stored and cjson.decode(stored)
  if doc and (ARGV[2] == '' or doc.collection == ARGV[2]) then
    remove_document(doc)
    removed = removed + 1
  elseif not doc and ARGV[2] ~= '' then
    redis.call('ZREM', p .. 'by-coll:' .. ARGV[2], ARGV[index])
  end
end
return removed
`);

/**
 * A query's snapshot: ARGV[2] collection ('' for all), ARGV[3…] the terms scored. Returns
 * {chunks, total_length, code or '', dfs, segments as [key, first, span]…, blocks per segment}.
 */
export const SNAPSHOT = script(`${COMMON}
local meta = redis.call('HMGET', p .. 'meta', 'chunks', 'total_length')
local code = ''
if ARGV[2] ~= '' then
  if redis.call('HEXISTS', p .. 'coll-docs', ARGV[2]) == 1 then code = redis.call('HGET', p .. 'codes', ARGV[2]) or '' end
  if code == '' then return {tonumber(meta[1] or '0'), tonumber(meta[2] or '0'), '', {}, {}, {}} end
end
local terms = {}
for index = 3, #ARGV do terms[#terms + 1] = ARGV[index] end
local dfs = {}
if #terms > 0 then dfs = redis.call('HMGET', p .. 'df', unpack(terms)) end
local segments = {}
local blocks = {}
local all = redis.call('HGETALL', p .. 'segments')
for index = 1, #all, 2 do
  local record = cjson.decode(all[index + 1])
  if (record.state == 'live' or record.state == 'merging') and (code == '' or record.code == code) then
    segments[#segments + 1] = all[index]
    segments[#segments + 1] = record.first_chunk
    segments[#segments + 1] = record.span
    if #terms > 0 then
      blocks[#blocks + 1] = redis.call('HMGET', p .. 'blocks:' .. all[index], unpack(terms))
    else
      blocks[#blocks + 1] = {}
    end
  end
end
for index = 1, #dfs do dfs[index] = dfs[index] or '0' end
return {tonumber(meta[1] or '0'), tonumber(meta[2] or '0'), code, dfs, segments, blocks}
`);

/**
 * Swaps a merged segment in: ARGV[2] the target, ARGV[3] its postings, ARGV[4] the sources joined
 * by ',', ARGV[5…] the dead chunks it dropped. Refused (0) when a source is no longer live (another
 * node merged it): the caller then removes its target.
 */
export const SWAP = script(`${COMMON}
local target = redis.call('HGET', p .. 'segments', ARGV[2])
if not target then return 0 end
local sources = {}
for source in string.gmatch(ARGV[4], '[^,]+') do
  local stored = redis.call('HGET', p .. 'segments', source)
  if not stored or cjson.decode(stored).state ~= 'live' then return 0 end
  sources[#sources + 1] = source
end
local record = cjson.decode(target)
record.state = 'live'
record.postings = tonumber(ARGV[3])
record.started = nil
redis.call('HSET', p .. 'segments', ARGV[2], cjson.encode(record))
for _, source in ipairs(sources) do
  redis.call('HDEL', p .. 'segments', source)
  redis.call('UNLINK', p .. 'blocks:' .. source)
end
for index = 5, #ARGV do redis.call('SREM', p .. 'dead', ARGV[index]) end
return 1
`);

/** Releases a lock only when it still holds this node's token: ARGV[2] lock name, ARGV[3] token. */
export const UNLOCK = script(`${COMMON}
if redis.call('GET', p .. ARGV[2]) == ARGV[3] then return redis.call('DEL', p .. ARGV[2]) end
return 0
`);
