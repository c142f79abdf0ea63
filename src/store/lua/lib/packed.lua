-- lib/packed.lua - the packed state of sliding_log and sliding_buckets (docs/lua.md), put into
-- those scripts by the build in place of their include line: a byte with the width of an entry
-- (4 or 8) plus the script's flags (multiples of 16), an 8-byte time, then the entries,
-- little-endian (4-byte ones unsigned).
local HEADER = 9 -- the width byte and the time

-- struct's format of an entry of width bytes.
local function packed_fmt(width)
    return width == 4 and '<I4' or '<i8'
end

-- The width, the time, the number of entries and the flags of the packed value s; nil if s is no
-- such value.
local function packed_read(s)
    local flags = string.byte(s, 1)
    local width = flags % 16
    if (width ~= 4 and width ~= 8) or #s < HEADER or (#s - HEADER) % width ~= 0 then return nil end
    return width, (struct.unpack('<i8', s, 2)), (#s - HEADER) / width, flags - width
end
