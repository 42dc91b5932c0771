package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/ledger"
)

var _ ledger.Recorder = (*Ledger)(nil)

// atScript defines at(v), which reads v, the value of the entry KEYS[1],
// asked about at round ARGV[1] (1 for a state id; see the value format
// above nowScript) by the state ARGV[2], the 16 bytes of its id for a
// flow's round and empty for a state id (its key names it). It returns
// the outcome state's letter, its data, the part of v before them (the
// round's digits, a flow's claimant and the claim's answers) and the
// claim's answers (false for none) when v is that round's, claimed for
// that state if a flow's; otherwise nil and the script's answer: gone
// when there is no entry or the flow is below the round (the round's entry
// expired), consumed when the flow moved past it or its round was not
// claimed for ARGV[2] (advanced without a claim, claimed for another
// state, or by an earlier release, which named none).
const atScript = `
local function at(v)
  if not v then return nil, -3 end
  local digits = string.match(v, '^%d+')
  if not digits then return nil, -5 end
  local round, want = tonumber(digits), tonumber(ARGV[1])
  if round < want then return nil, -3 end
  if round > want then return nil, -1 end
  local head, rest = digits, string.sub(v, #digits + 1)
  if ARGV[2] ~= '' then
    local c = string.sub(rest, 1, 1)
    if c == '' or c == 'p' or c == 'o' or c == 'n' then return nil, -1 end
    if c ~= 'c' or #rest < 17 then return nil, -5 end
    if string.sub(rest, 2, 17) ~= ARGV[2] then return nil, -1 end
    head, rest = head .. string.sub(rest, 1, 17), string.sub(rest, 18)
  end
  local answers = false
  if string.sub(rest, 1, 1) == 'a' then
    if #rest < 34 then return nil, -5 end
    answers = string.sub(rest, 2, 33)
    head, rest = head .. string.sub(rest, 1, 33), string.sub(rest, 34)
  end
  return string.sub(rest, 1, 1), string.sub(rest, 2), head, answers
end
`

// recordScript stores ARGV[3] as the outcome of the entry KEYS[1] at
// round ARGV[1], claimed for ARGV[2] (see atScript), an empty one as 'n',
// keeping its expiry, its claimant and its answers: 0, or the answer for
// an entry that is not pending for it.
var recordScript = goredis.NewScript(atScript + `
local state, rest, head, answers = at(redis.call('GET', KEYS[1]))
if not state then return rest end
if state == '' and answers then return -5 end
if state == '' or state == 'o' or state == 'n' then return -1 end
if state ~= 'p' then return -5 end
local v = head .. 'n'
if ARGV[3] ~= '' then v = head .. 'o' .. ARGV[3] end
redis.call('SET', KEYS[1], v, 'KEEPTTL')
return 0`)

// outcomeScript returns the outcome recorded for the entry KEYS[1] at
// round ARGV[1], claimed for ARGV[2] (see atScript), or the answer why
// there is none: a conflict when the claim's answers are not ARGV[3] (32
// bytes, or empty for none), whatever became of the claim; otherwise
// pending while its deadline is ahead on Redis's clock, consumed once it
// has passed.
var outcomeScript = goredis.NewScript(nowScript + atScript + `
local state, rest, _, answers = at(redis.call('GET', KEYS[1]))
if not state then return rest end
if state == '' then
  if answers then return -5 end
  return -1
end
if state ~= 'p' and state ~= 'o' and state ~= 'n' then return -5 end
if (answers or '') ~= ARGV[3] then return -6 end
if state == 'o' and rest ~= '' then return rest end
if state == 'p' then
  if now < tonumber(rest) then return -4 end
end
return -1`)

// entryKey is the key of e of tenant, the round its value holds, and the
// claimant the scripts judge (atScript): e.ID for a flow's round, none for
// a state's entry, which its key names.
func entryKey(tenant string, e ledger.Entry) (key string, round uint32, claimant []byte) {
	if e.Round == 0 {
		return redisKey(tenant, e.ID), 1, []byte{}
	}
	return flowKey(tenant, e.Flow), e.Round, e.ID[:]
}

// answersOf is e's answers as the scripts take them: 32 bytes, or empty for
// none.
func answersOf(e ledger.Entry) []byte {
	if e.Answers == nil {
		return []byte{}
	}
	return e.Answers[:]
}

// Claim implements ledger.Recorder: Consume or Advance, with the entry
// pending until wait, in whole milliseconds, has passed on Redis's clock;
// a flow's round claimed for e.ID; e.Answers kept.
func (r *Ledger) Claim(ctx context.Context, tenant string, e ledger.Entry, until time.Time, wait time.Duration) error {
	waitMs := max(0, wait.Milliseconds())
	key, round, claimant := entryKey(tenant, e)
	if e.Round == 0 {
		return r.consume(ctx, key, until.UnixMilli(), waitMs, answersOf(e))
	}
	return r.advance(ctx, key, round, until.UnixMilli(), waitMs, claimant, answersOf(e))
}

// Record implements ledger.Recorder with recordScript. With Replicas set
// it waits for them as a consume does (see write), and a record they do
// not acknowledge is ErrUnavailable but stays: it is the true outcome of
// a handler that ran, so a retry answered with it is right, and one that
// a failover loses leaves the entry claimed, which refuses the retry once
// its wait is over. Undoing it would only refuse what can be answered.
func (r *Ledger) Record(ctx context.Context, tenant string, e ledger.Entry, outcome []byte) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	key, round, claimant := entryKey(tenant, e)
	_, undoOn, err := r.write(ctx, recordScript, key, round, claimant, outcome)
	if undoOn != nil {
		undoOn.Close() // nothing to undo: see above
	}
	return err
}

// Outcome implements ledger.Recorder with outcomeScript, on the primary
// that holds e's entry.
func (r *Ledger) Outcome(ctx context.Context, tenant string, e ledger.Entry) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	key, round, claimant := entryKey(tenant, e)
	res, err := outcomeScript.Run(ctx, r.client, []string{key}, round, claimant, answersOf(e)).Result()
	if err != nil {
		err = fmt.Errorf("%w: redis: %v", ledger.ErrUnavailable, err)
		r.reloadOn(ctx, err)
		return nil, err
	}
	switch v := res.(type) {
	case string:
		return []byte(v), nil
	case int64:
		if v < 0 {
			return nil, scriptResult(v, nil)
		}
	}
	return nil, fmt.Errorf("%w: redis answered a %T", ledger.ErrUnavailable, res)
}
