"""The Lua scripts the Redis dispatcher runs (loaded once, called by SHA)."""

# Fill up to ARGV[3] entries from the streams in KEYS, in the order given (the weighted
# order for this round). Creates a missing group at id 0 so nothing added before it exists
# is skipped. Non-blocking; the caller blocks separately only when this returns nothing.
FILL_SCRIPT = """
local out = {}
local want = tonumber(ARGV[3])
for _, key in ipairs(KEYS) do
  if want <= 0 then break end
  local res = redis.pcall('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', want,
                          'STREAMS', key, '>')
  if type(res) == 'table' and res.err then
    if string.find(res.err, 'NOGROUP') then
      redis.call('XGROUP', 'CREATE', key, ARGV[1], '0', 'MKSTREAM')
      res = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', want,
                       'STREAMS', key, '>')
    else
      return redis.error_reply(res.err)
    end
  end
  if res then
    for _, stream in ipairs(res) do
      for _, entry in ipairs(stream[2]) do
        out[#out + 1] = {stream[1], entry[1], entry[2]}
        want = want - 1
      end
    end
  end
end
return out
"""

# XADD a batch in one command: ARGV[1] is MAXLEN, ARGV[2] a JSON array of entries
# [index of the stream in KEYS, job_id, job_type, queue, tenant_id]. One EVALSHA with one JSON
# argument costs ~1 µs of client CPU per entry, where a pipeline of XADDs costs ~25 µs of
# redis-py CPU per entry. Like a pipeline, an entry that fails (a key of the wrong type) does
# not stop the others; the first error is returned after all were tried.
PUBLISH_SCRIPT = """
local maxlen = ARGV[1]
local first_error = nil
for _, e in ipairs(cjson.decode(ARGV[2])) do
  local res = redis.pcall('XADD', KEYS[e[1]], 'MAXLEN', '~', maxlen, '*', 'job_id', e[2],
                          'job_type', e[3], 'queue', e[4], 'tenant_id', e[5])
  if type(res) == 'table' and res.err and first_error == nil then
    first_error = res.err
  end
end
if first_error then
  return redis.error_reply(first_error)
end
return 1
"""
