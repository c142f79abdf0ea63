-- lib/packed.lua - the packed state of sliding_buckets, and of sliding_log as older sluiceds
-- wrote it (one stamp per unit; sliding_log.lua reads it and writes its own form, whose first
-- byte has 128 set, which packed_read() refuses) (docs/lua.md), put into those scripts by the
-- build in place of their include line: a byte with the width of an entry (4 or 8) plus the
-- script's flags (multiples of 16) plus NUMBERED, an 8-byte time, then the entries,
-- little-endian (4-byte ones unsigned), then the numbers the state was written under (the
-- script's NUMS) and one byte giving their length. A value without NUMBERED (an older sluiced's)
-- ends with the entries and records no numbers.
local HEADER = 9 -- the width byte and the time
local NUMBERED = 64 -- in the width byte: the numbers follow the entries

-- struct's format of an entry of width bytes.
local function packed_fmt(width)
    return width == 4 and '<I4' or '<i8'
end

-- The width, the time, the number of entries, the flags (without NUMBERED) and the numbers'
-- text (nil when it records none) of the packed value s; nil if s is no such value.
local function packed_read(s)
    local flags, tail, nums = string.byte(s, 1), 0, nil
    if not flags or flags >= 128 then return nil end
    if flags >= NUMBERED then
        tail = 1 + string.byte(s, -1)
        nums, flags = string.sub(s, -tail, -2), flags - NUMBERED
    end
    local width, len = flags % 16, #s - tail
    if (width ~= 4 and width ~= 8) or len < HEADER or (len - HEADER) % width ~= 0 then
        return nil
    end
    return width, (struct.unpack('<i8', s, 2)), (len - HEADER) / width, flags - width, nums
end

-- The packed value s as the script writes it: recording the numbers (suffix: NUMS and its
-- length byte), those packed_read() found (nums), or, for an older value without, suffix's.
local function packed_numbered(s, nums, suffix)
    if nums then return s end
    return string.char(string.byte(s, 1) + NUMBERED) .. string.sub(s, 2) .. suffix
end
