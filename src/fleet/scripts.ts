/**
 * The fleet's decisions, one Lua script each, named for the decision. Each runs atomically on the
 * keys of one session (KEYS[1] = its turns hash, KEYS[2] = its finished set, KEYS[3] = its pending
 * stops, all in the session's hash tag, so one slot on Redis Cluster), so no two decisions about a
 * turn interleave. Session and turn ids arrive in their wire form (src/fleet/wire-id.ts) and are
 * stored and published so. Rules every script keeps (the record is the truth):
 *
 * 1. A turn's record (`t:<turnId>` in the turns hash) holds its epoch, owner node, status and
 *    lease deadline. A caller that names a turn also names its epoch and node; a mismatch is refused.
 * 2. Terminal statuses (`completed`, `failed`, `cancelled`, `interrupted`) never change.
 * 3. A running or cancelling turn whose lease deadline has passed (Redis server time) is
 *    `interrupted` the moment any script looks at it (`expire_if_due`): the lease is the only
 *    proof that the owner is alive, so no script trusts a turn past it.
 * 4. Running records never expire; a finished record expires `finishedTtlMs` after it finished.
 * 5. A stop of a turn id with no record is kept as pending (KEYS[3], until its `untilMs`) and
 *    taken by that turn's registration, which then records the turn as `cancelling`. A session
 *    keeps at most `maxPendingStops` of them: expired ones are pruned whenever one is added, the
 *    key lives as long as its newest entry, and past the cap a new one is refused (`full`),
 *    never made room for by dropping another.
 * 6. Messages go out with plain PUBLISH, from inside the script that made the decision: on Redis
 *    Cluster it reaches a subscriber on any node (SPUBLISH could not: the owner's channel is not in
 *    the session's slot). docs/fleet.md says why and what it costs.
 *
 * Time is Redis server time (`TIME`), so the instances' clocks never have to agree.
 */
import { createHash } from 'node:crypto';
import { FleetReasons } from '../constants.js';
import { command, type FleetRedisClient } from './client.js';

/** A JS string as a Lua string literal (the reason codes are ASCII: JSON's quoting is Lua's). */
const lua = (s: string): string => JSON.stringify(s);

const PRELUDE = String.raw`
local TERMINAL = { completed = true, failed = true, cancelled = true, interrupted = true }
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function load(id)
  local raw = redis.call('HGET', KEYS[1], 't:' .. id)
  if not raw then return nil end
  return cjson.decode(raw)
end
local function save(rec)
  redis.call('HSET', KEYS[1], 't:' .. rec.turnId, cjson.encode(rec))
end
-- Tell every node that asked to hear of this turn's end (the requesters of its stop).
local function notify(rec, chan, kind)
  local msg = cjson.encode({ kind = kind, sessionId = rec.sessionId, turnId = rec.turnId,
    epoch = rec.epoch, node = rec.node, status = rec.status, report = rec.report })
  for node, _ in pairs(rec.requesters) do redis.call('PUBLISH', chan .. node, msg) end
end
-- The terminal write (rule 2 is the caller's check). Finished records older than the TTL are
-- pruned; the session's keys live as long as its newest record unless a turn still runs.
local function finish(rec, status, reason, now, ttl)
  rec.status = status
  rec.reason = reason or rec.reason
  rec.finishedAt = now
  save(rec)
  redis.call('ZADD', KEYS[2], now, rec.turnId)
  local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl))
  for _, id in ipairs(old) do redis.call('HDEL', KEYS[1], 't:' .. id) end
  if #old > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl)) end
  if redis.call('HGET', KEYS[1], 'latest') == rec.turnId then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
-- Rule 3.
local function expire_if_due(rec, now, ttl, chan)
  if (rec.status == 'running' or rec.status == 'cancelling') and rec.leaseUntil <= now then
    finish(rec, 'interrupted', ${lua(FleetReasons.leaseExpired)}, now, ttl)
    notify(rec, chan, 'ended')
    return true
  end
  return false
end
`;

/**
 * register: start a turn; a pending stop of its id (rule 5) is taken: the turn starts `cancelling`.
 * ARGV sessionId, turnId, node, leaseMs, ttlMs, channelPrefix.
 * → {'ok', epoch, leaseUntil, stopped ('1'|'0'), reason, graceMs} | {'exists', status} | {'busy', turnId, node}
 */
const REGISTER = String.raw`
local now, ttl = now_ms(), tonumber(ARGV[5])
local same = load(ARGV[2])
if same then
  expire_if_due(same, now, ttl, ARGV[6])
  return { 'exists', same.status }
end
local latest = redis.call('HGET', KEYS[1], 'latest')
if latest then
  local prev = load(latest)
  if prev and not TERMINAL[prev.status] and not expire_if_due(prev, now, ttl, ARGV[6]) then
    return { 'busy', prev.turnId, prev.node }
  end
end
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
local rec = { sessionId = ARGV[1], turnId = ARGV[2], epoch = epoch, node = ARGV[3], status = 'running',
  stopRequested = false, leaseUntil = now + tonumber(ARGV[4]), startedAt = now, requesters = {} }
local raw = redis.call('HGET', KEYS[3], ARGV[2])
if raw then
  redis.call('HDEL', KEYS[3], ARGV[2])
  local p = cjson.decode(raw)
  if p.untilMs > now then
    rec.status = 'cancelling'
    rec.stopRequested = true
    rec.reason = p.reason
    rec.requester = p.requester
    rec.stopAt = p.at
    rec.graceMs = p.graceMs
  end
end
save(rec)
redis.call('HSET', KEYS[1], 'latest', rec.turnId)
redis.call('PERSIST', KEYS[1])
redis.call('PERSIST', KEYS[2])
return { 'ok', tostring(epoch), tostring(rec.leaseUntil), rec.stopRequested and '1' or '0', rec.reason or '',
  rec.graceMs and tostring(rec.graceMs) or '' }
`;

/**
 * request_stop: record the stop (status `cancelling`, reason, requester), then publish it to the
 * owner — in this order, in one script, so a stop is durable before it is delivered. Answers
 * `not_found` / `finished` / `interrupted` without publishing; a named turn with no record gets
 * a pending stop (rule 5), also without publishing.
 * ARGV sessionId, turnId ('' = the latest), requester, reason, graceMs ('' = owner's default),
 * ttlMs, channelPrefix, wantAck ('1' | '0'), pendingMs, maxPending.
 * → {'cancelling', turnId, epoch, node, delivered} | {'finished', turnId, status}
 *   | {'interrupted', turnId, epoch, node} | {'pending', turnId} | {'full', turnId} | {'not_found'}
 */
const REQUEST_STOP = String.raw`
local now, ttl, chan = now_ms(), tonumber(ARGV[6]), ARGV[7]
local id = ARGV[2]
if id == '' then id = redis.call('HGET', KEYS[1], 'latest') end
if not id then return { 'not_found' } end
local rec = load(id)
if not rec then
  if ARGV[2] == '' then return { 'not_found' } end
  -- Rule 5: prune what has expired (at most maxPending entries: O(1) a stop), keep the first
  -- stop of a turn id (a repeat joins it), refuse past the cap.
  local pend, cap = tonumber(ARGV[9]), tonumber(ARGV[10])
  local all = redis.call('HGETALL', KEYS[3])
  local live, newest, mine = 0, 0, nil
  for i = 1, #all, 2 do
    local p = cjson.decode(all[i + 1])
    if p.untilMs <= now then redis.call('HDEL', KEYS[3], all[i])
    else
      live = live + 1
      if p.untilMs > newest then newest = p.untilMs end
      if all[i] == id then mine = p end
    end
  end
  if mine then return { 'pending', id } end
  if live >= cap then
    if live > 0 then redis.call('PEXPIRE', KEYS[3], newest - now) end
    return { 'full', id }
  end
  redis.call('HSET', KEYS[3], id, cjson.encode({ reason = ARGV[4], graceMs = tonumber(ARGV[5]),
    requester = ARGV[3], at = now, untilMs = now + pend }))
  redis.call('PEXPIRE', KEYS[3], pend)
  return { 'pending', id }
end
expire_if_due(rec, now, ttl, chan)
if rec.status == 'interrupted' then return { 'interrupted', rec.turnId, tostring(rec.epoch), rec.node } end
if TERMINAL[rec.status] then return { 'finished', rec.turnId, rec.status } end
if ARGV[8] == '1' then rec.requesters[ARGV[3]] = true end
if rec.status == 'running' then
  rec.status = 'cancelling'
  rec.stopRequested = true
  rec.reason = ARGV[4]
  rec.requester = ARGV[3]
  rec.stopAt = now
  if ARGV[5] ~= '' then rec.graceMs = tonumber(ARGV[5]) end
end
save(rec)
local delivered = redis.call('PUBLISH', chan .. rec.node, cjson.encode({ kind = 'stop',
  sessionId = rec.sessionId, turnId = rec.turnId, epoch = rec.epoch, reason = rec.reason, graceMs = rec.graceMs }))
return { 'cancelling', rec.turnId, tostring(rec.epoch), rec.node, tostring(delivered) }
`;

/**
 * renew_lease: the owner proves it is alive, and reads the turn's pending stop (the path that
 * recovers a missed publish). ARGV turnId, epoch, node, leaseMs, ttlMs, channelPrefix.
 * → {'ok', leaseUntil, stopRequested ('1'|'0'), reason, graceMs} | {'lost', status}
 */
const RENEW_LEASE = String.raw`
local now, ttl = now_ms(), tonumber(ARGV[5])
local rec = load(ARGV[1])
if not rec or tostring(rec.epoch) ~= ARGV[2] or rec.node ~= ARGV[3] then return { 'lost', 'gone' } end
if expire_if_due(rec, now, ttl, ARGV[6]) or TERMINAL[rec.status] then return { 'lost', rec.status } end
rec.leaseUntil = now + tonumber(ARGV[4])
save(rec)
return { 'ok', tostring(rec.leaseUntil), rec.stopRequested and '1' or '0', rec.reason or '',
  rec.graceMs and tostring(rec.graceMs) or '' }
`;

/**
 * record_end: the owner's terminal write, refused unless the turn is still this owner's (epoch,
 * node) and alive; it acknowledges every stop requester with the status (and StopReport).
 * ARGV turnId, epoch, node, status, reason, reportJson ('' = none), ttlMs, channelPrefix.
 * → {'ok'} | {'refused', status}
 */
const RECORD_END = String.raw`
local now, ttl = now_ms(), tonumber(ARGV[7])
local rec = load(ARGV[1])
if not rec or tostring(rec.epoch) ~= ARGV[2] or rec.node ~= ARGV[3] then return { 'refused', 'gone' } end
if expire_if_due(rec, now, ttl, ARGV[8]) or TERMINAL[rec.status] then return { 'refused', rec.status } end
if ARGV[6] ~= '' then rec.report = ARGV[6] end
local reason = ARGV[5]
if reason == '' then reason = nil end
finish(rec, ARGV[4], reason, now, ttl)
notify(rec, ARGV[8], 'ended')
return { 'ok' }
`;

/**
 * reap_lease: the sweep's re-check of one lease the index says has passed. `interrupted` goes to
 * exactly one sweep per dead owner's turn (`rec.reaped`), also when another script found the
 * lease expired first, so one instance closes that turn's history in the shared store.
 * ARGV turnId, ttlMs, channelPrefix. → {'interrupted'} | {'alive', leaseUntil} | {'gone'}
 */
const REAP_LEASE = String.raw`
local now, ttl = now_ms(), tonumber(ARGV[2])
local rec = load(ARGV[1])
if not rec then return { 'gone' } end
expire_if_due(rec, now, ttl, ARGV[3])
if rec.status == 'interrupted' and rec.reason == ${lua(FleetReasons.leaseExpired)} and not rec.reaped then
  rec.reaped = true
  save(rec)
  return { 'interrupted' }
end
if TERMINAL[rec.status] then return { 'gone' } end
return { 'alive', tostring(rec.leaseUntil) }
`;

/** read_latest: the session's latest turn record (JSON), or nil. ARGV none. */
const READ_LATEST = String.raw`
local id = redis.call('HGET', KEYS[1], 'latest')
if not id then return false end
return redis.call('HGET', KEYS[1], 't:' .. id)
`;

export interface FleetScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

export function script(name: string, body: string): FleetScript {
  const source = `-- fullstop fleet: ${name}\n${PRELUDE}\n${body}`;
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

export const SCRIPTS = {
  register: script('register', REGISTER),
  requestStop: script('request_stop', REQUEST_STOP),
  renewLease: script('renew_lease', RENEW_LEASE),
  recordEnd: script('record_end', RECORD_END),
  reapLease: script('reap_lease', REAP_LEASE),
  readLatest: script('read_latest', READ_LATEST),
} as const;

/**
 * Run a script by EVALSHA; on NOSCRIPT (a restarted or flushed server, or a replica just promoted,
 * has forgotten it) once more by EVAL, which also caches it again. All keys are the session's (one
 * hash tag a script): a cluster client sends it to the master of their slot.
 *
 * While Redis Cluster migrates the slot, a script is refused with `TRYAGAIN` (its keys are split
 * between the two nodes), or redirected (`ASK`, `MOVED`) more often than the client follows: that
 * is retried with backoff (`RETRY_FIRST_MS` doubling to `RETRY_MAX_MS`) until `timeoutMs` (the
 * whole call's bound: a stop's `timeoutMs`, a renewal's lease) has passed.
 */
export async function runScript(
  client: FleetRedisClient, s: FleetScript, keys: readonly string[], args: readonly string[], timeoutMs: number,
): Promise<unknown> {
  const deadline = performance.now() + timeoutMs;
  for (let pause = RETRY_FIRST_MS; ; pause = Math.min(pause * 2, RETRY_MAX_MS)) {
    try {
      return await runOnce(client, s, keys, args, Math.max(1, deadline - performance.now()));
    } catch (error) {
      if (!isMigrating(error) || performance.now() + pause >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/** The first pause before a script refused during a slot migration is sent again, in ms. */
const RETRY_FIRST_MS = 10;
/** The longest pause between two attempts during a slot migration, in ms. */
const RETRY_MAX_MS = 200;

/** A refusal that a slot migration causes and its end cures (node-redis follows ASK/MOVED up to its redirection limit). */
export function isMigrating(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return /^(TRYAGAIN|ASK|MOVED)\b/.test(error.message) || error.name === 'MaxCommandRedirectionsError'
    || (error.cause instanceof Error && /^(TRYAGAIN|ASK|MOVED)\b/.test(error.cause.message));
}

async function runOnce(client: FleetRedisClient, s: FleetScript, keys: readonly string[], args: readonly string[], timeoutMs: number): Promise<unknown> {
  const tail = [String(keys.length), ...keys, ...args];
  try {
    return await command(client, keys[0], ['EVALSHA', s.sha, ...tail], timeoutMs);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return command(client, keys[0], ['EVAL', s.source, ...tail], timeoutMs);
  }
}
