/**
 * The scripts of fleet answers (`fleet.answer`), one per decision, each on one key: the
 * question's record (`keys.question(questionId)`, its own hash tag, so one slot on Redis Cluster).
 * The record is JSON `{ sessionId, turnId, epoch, node, state, claim?, requester?, answer? }`;
 * `state` moves open → claimed (one answer holds it) → delivered (the owner took it; it takes it
 * again until it has settled it) → answered (its runner accepted it) → ended (its turn ended: kept
 * `leaseMs`, answering `not_found`); a claim the owner never took goes back to open, a refused one
 * deletes the record, and so does the turn's end unless an answer was accepted. Only
 * `claim_answer` moves a record out of `open`, atomically: the first answer wins fleet-wide,
 * however many instances answer at once. Messages go out with PUBLISH from inside the
 * script that decided, as the stop's do (src/fleet/scripts.ts, rule 6).
 */
import { script } from './scripts.js';

/** open_question: the owner registers a question its turn asked. ARGV recordJson, ttlMs. */
const OPEN_QUESTION = String.raw`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 'ok'
`;

/**
 * claim_answer: the first answer claims the question and is published to its owner.
 * ARGV questionId, claim, requester, answerJson, channelPrefix.
 * → {'claimed', node} | {'already_answered'} | {'not_found'}
 */
const CLAIM_ANSWER = String.raw`
local raw = redis.call('GET', KEYS[1])
if not raw then return { 'not_found' } end
local q = cjson.decode(raw)
if q.state == 'ended' then return { 'not_found' } end
if q.state ~= 'open' then return { 'already_answered' } end
q.state, q.claim, q.requester, q.answer = 'claimed', ARGV[2], ARGV[3], ARGV[4]
redis.call('SET', KEYS[1], cjson.encode(q), 'KEEPTTL')
redis.call('PUBLISH', ARGV[5] .. q.node, cjson.encode({ kind = 'answer', questionId = ARGV[1], claim = ARGV[2] }))
return { 'claimed', q.node }
`;

/**
 * take_answer: the owner takes a claimed answer to give it to its runner (claim '' = whichever is
 * claimed: the renewal's poll, for a lost publish), and keeps its record alive another ttlMs. A
 * delivered one is taken again: a take whose reply the owner lost (a timeout, a dropped
 * connection) would otherwise leave it delivered and never given, every later answer
 * `already_answered`; the owner gives an answer to its runner once (src/fleet/questions.ts,
 * `given`) and only settles it again. ARGV node, claim, ttlMs. → {'take', claim, answerJson, requester} | {'none'}
 */
const TAKE_ANSWER = String.raw`
local raw = redis.call('GET', KEYS[1])
if not raw then return { 'none' } end
local q = cjson.decode(raw)
if q.node ~= ARGV[1] then return { 'none' } end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if (q.state ~= 'claimed' and q.state ~= 'delivered') or (ARGV[2] ~= '' and q.claim ~= ARGV[2]) then return { 'none' } end
q.state = 'delivered'
redis.call('SET', KEYS[1], cjson.encode(q), 'KEEPTTL')
return { 'take', q.claim, q.answer, q.requester }
`;

/**
 * settle_answer: the owner's runner took the answer (accepted '1': the record says answered, so
 * later answers are already_answered) or refused it ('0': the question is gone); the requester
 * hears it, also when the turn's end has deleted the record meanwhile (the answer may be what
 * ended it). ARGV questionId, claim, accepted, node, channelPrefix, requester. → 'ok'
 */
const SETTLE_ANSWER = String.raw`
local raw = redis.call('GET', KEYS[1])
if raw then
  local q = cjson.decode(raw)
  if q.state == 'delivered' and q.claim == ARGV[2] then
    if ARGV[3] == '1' then
      q.state, q.answer = 'answered', nil
      redis.call('SET', KEYS[1], cjson.encode(q), 'KEEPTTL')
    else
      redis.call('DEL', KEYS[1])
    end
  end
end
redis.call('PUBLISH', ARGV[5] .. ARGV[6], cjson.encode({ kind = 'answered', questionId = ARGV[1], claim = ARGV[2],
  accepted = ARGV[3] == '1', node = ARGV[4] }))
return 'ok'
`;

/**
 * end_question: the question's turn ended. A record whose answer the owner's runner took
 * (`acceptedClaim`, '' for none: also one whose settle_answer never landed) is kept as `ended`
 * for ttlMs, so a requester whose confirmation was lost still learns it was accepted
 * (release_answer) while new answers find `not_found`; any other is deleted.
 * ARGV acceptedClaim, ttlMs. → 'kept' | 'deleted'
 */
const END_QUESTION = String.raw`
local raw = redis.call('GET', KEYS[1])
if raw and ARGV[1] ~= '' then
  local q = cjson.decode(raw)
  if q.claim == ARGV[1] then
    q.state, q.answer = 'ended', nil
    redis.call('SET', KEYS[1], cjson.encode(q), 'PX', ARGV[2])
    return 'kept'
  end
end
redis.call('DEL', KEYS[1])
return 'deleted'
`;

/**
 * release_answer: the requester's wait ran out (or its claim's reply was lost). A claim the owner
 * never took is undone (the question is open again: nothing was given); otherwise says what
 * became of it (`answered` also once its turn has ended, the record `ended`).
 * ARGV claim. → {'released'} | {'answered', node} | {'delivered'} | {'gone'}
 */
const RELEASE_ANSWER = String.raw`
local raw = redis.call('GET', KEYS[1])
if not raw then return { 'gone' } end
local q = cjson.decode(raw)
if q.claim ~= ARGV[1] then return { 'gone' } end
if q.state == 'answered' or q.state == 'ended' then return { 'answered', q.node } end
if q.state == 'delivered' then return { 'delivered' } end
q.state, q.claim, q.requester, q.answer = 'open', nil, nil, nil
redis.call('SET', KEYS[1], cjson.encode(q), 'KEEPTTL')
return { 'released' }
`;

export const QUESTION_SCRIPTS = {
  open: script('open_question', OPEN_QUESTION),
  claim: script('claim_answer', CLAIM_ANSWER),
  take: script('take_answer', TAKE_ANSWER),
  settle: script('settle_answer', SETTLE_ANSWER),
  release: script('release_answer', RELEASE_ANSWER),
  end: script('end_question', END_QUESTION),
} as const;
