-- Wireshark dissector for the headunitd protocol (Protocol/PROTOCOL.md).
--
--   tshark -X lua_script:Protocol/headunit.lua -r capture.pcap
--   wireshark -X lua_script:Protocol/headunit.lua capture.pcap
--
-- Frames are a 12-byte header ("HU", kind, flags, channel u32 BE, length u32
-- BE) and a payload; MESSAGE payloads are a protobuf headunit.v1.Envelope.
-- Registered on TCP port 7420 and as a heuristic TCP dissector (the "HU"
-- magic and a plausible header), so a daemon on any port is found. Frames
-- split across TCP segments are reassembled; several in a segment are split.
-- headunitd's TCP is TLS 1.3: the frames are inside TLS application data.
-- Given the TLS secrets (SSLKEYLOGFILE, `-o tls.keylog_file:FILE`), Wireshark
-- decrypts them and this dissector, registered as a heuristic TLS
-- subdissector too, decodes the frames inside (docs/WIRESHARK.md).
--
-- The Envelope is decoded here, with the message, field and enum names read
-- from the .proto files next to this script: the Info column reads
-- `MESSAGE ch=0 len=66 TemplateRequest{push: list 'genres'} [req 4]` or
-- `... Result ERROR_CODE_INVALID_POSITION: ... [req 6]`, and the tree holds
-- every field of the Envelope by name. Wireshark's own protobuf tree can be
-- added with the preference headunit.protobuf (see docs/WIRESHARK.md).

local headunit = Proto("headunit", "headunitd protocol")

local KINDS = { [1] = "MESSAGE", [2] = "PING", [3] = "PONG", [4] = "DATA", [5] = "MEDIA", [6] = "VIDEO" }
local HEADER = 12
local MAX_PAYLOAD = 1048576

local f_magic = ProtoField.string("headunit.magic", "Magic")
local f_kind = ProtoField.uint8("headunit.kind", "Kind", base.HEX, KINDS)
local f_flags = ProtoField.uint8("headunit.flags", "Flags", base.HEX)
local f_channel = ProtoField.uint32("headunit.channel", "Channel")
local f_length = ProtoField.uint32("headunit.length", "Payload length")
local f_payload = ProtoField.bytes("headunit.payload", "Payload")
local f_request = ProtoField.uint32("headunit.request_id", "Request id")
local f_body = ProtoField.string("headunit.body", "Body")
local f_summary = ProtoField.string("headunit.summary", "Message")
local f_code = ProtoField.string("headunit.error_code", "Error code")
-- VIDEO frames' 16-byte header (PROTOCOL.md section 25.3).
local f_video_ts = ProtoField.uint64("headunit.video.timestamp_us", "Timestamp (us)")
local f_video_number = ProtoField.uint32("headunit.video.frame_number", "Frame number")
local f_video_key = ProtoField.bool("headunit.video.keyframe", "Keyframe")
-- MEDIA frames' timestamp (PROTOCOL.md section 24.4); the audio unit stays opaque.
local f_media_ts = ProtoField.uint64("headunit.media.timestamp_us", "Timestamp (us)")
headunit.fields = { f_magic, f_kind, f_flags, f_channel, f_length, f_payload, f_request, f_body, f_summary, f_code,
  f_video_ts, f_video_number, f_video_key, f_media_ts }

local e_magic = ProtoExpert.new("headunit.bad_magic", "Not \"HU\": BAD_MAGIC", expert.group.MALFORMED, expert.severity.ERROR)
local e_flags = ProtoExpert.new("headunit.flags_set", "Flags must be 0: RESERVED_FLAGS", expert.group.PROTOCOL, expert.severity.WARN)
local e_channel = ProtoExpert.new("headunit.channel_set", "Channel must be 0 except on DATA, MEDIA and VIDEO: RESERVED_FLAGS", expert.group.PROTOCOL, expert.severity.WARN)
local e_kind = ProtoExpert.new("headunit.unknown_kind", "Unknown frame kind: UNKNOWN_FRAME_KIND", expert.group.PROTOCOL, expert.severity.WARN)
local e_length = ProtoExpert.new("headunit.too_large", "Length over the 1 MiB maximum: FRAME_TOO_LARGE", expert.group.MALFORMED, expert.severity.ERROR)
local e_ping = ProtoExpert.new("headunit.ping_too_long", "PING payload over 64 bytes: MALFORMED_PAYLOAD", expert.group.MALFORMED, expert.severity.WARN)
local e_proto = ProtoExpert.new("headunit.bad_envelope", "Payload is not a valid Envelope: MALFORMED_PAYLOAD", expert.group.MALFORMED, expert.severity.WARN)
local e_error = ProtoExpert.new("headunit.error", "Error result", expert.group.RESPONSE_CODE, expert.severity.NOTE)
headunit.experts = { e_magic, e_flags, e_channel, e_kind, e_length, e_ping, e_proto, e_error }

-- ---------------------------------------------------------------- the schema, from the .proto files

local schema = { messages = {}, enums = {} }   -- messages[name][number] = {name=, type=}; enums[name][number] = "NAME"

local function proto_dir()
  local source = debug.getinfo(1, "S").source
  local path = source:sub(1, 1) == "@" and source:sub(2) or source
  return path:match("^(.*)[/\\]") or "."
end

local function load_proto(path)
  local file = io.open(path, "r")
  if not file then return end
  local text = file:read("*a")
  file:close()
  text = text:gsub("//[^\n]*", "")
  -- Messages (not nested in this schema) and enums, one level deep.
  for kind, name, body in text:gmatch("(%a+)%s+([%w_]+)%s*(%b{})") do
    if kind == "message" then
      local fields = {}
      for label_type, fname, number in body:gmatch("([%w_%.%s]-)%s+([%w_]+)%s*=%s*(%d+)%s*;") do
        local ftype = label_type:match("([%w_%.]+)%s*$")
        if ftype and ftype ~= "reserved" then fields[tonumber(number)] = { name = fname, type = ftype } end
      end
      schema.messages[name] = fields
    elseif kind == "enum" then
      local values = {}
      for vname, number in body:gmatch("([%w_]+)%s*=%s*(%-?%d+)%s*;") do values[tonumber(number)] = vname end
      schema.enums[name] = values
    end
  end
end

-- Every .proto file beside this script (Dir is Wireshark's directory lister),
-- so a message added to the schema is named without touching this file.
local dir = proto_dir()
local loaded = false
if Dir and Dir.exists and Dir.exists(dir) then
  local ok = pcall(function()
    for name in Dir.open(dir, ".proto") do load_proto(dir .. "/" .. name); loaded = true end
  end)
  loaded = ok and loaded
end
if not loaded then
  for _, name in ipairs({ "errors", "session", "templates", "headunit", "accessory", "navigation", "remote", "call", "audio", "video", "security", "assistant" }) do
    load_proto(dir .. "/" .. name .. ".proto")
  end
end
if not schema.messages["Envelope"] then
  -- Frames still decode; messages show as "(unknown body N)".
  report_failure("headunit.lua: no Envelope in the .proto files of " .. dir .. "; put them beside this script")
end

-- ---------------------------------------------------------------- a small protobuf reader

local function read_varint(bytes, pos, last)
  local value, shift = 0, 0
  while pos <= last do
    local b = bytes:get_index(pos)
    value = value + (b % 128) * (2 ^ shift)
    pos = pos + 1
    if b < 128 then return value, pos end
    shift = shift + 7
    if shift > 63 then return nil end
  end
  return nil
end

-- Fields of one message: list of {number, wire, value (number) or first, last (byte range)}.
local function fields_of(bytes, first, last)
  local out, pos = {}, first
  while pos <= last do
    local key
    local start = pos
    key, pos = read_varint(bytes, pos, last)
    if not key then return nil end
    local number, wire = math.floor(key / 8), key % 8
    if wire == 0 then
      local v
      v, pos = read_varint(bytes, pos, last)
      if not v then return nil end
      out[#out + 1] = { number = number, wire = 0, value = v, start = start }
    elseif wire == 2 then
      local len
      len, pos = read_varint(bytes, pos, last)
      if not len or pos + len - 1 > last then return nil end
      out[#out + 1] = { number = number, wire = 2, first = pos, last = pos + len - 1, start = start }
      pos = pos + len
    elseif wire == 5 or wire == 1 then
      local size = wire == 5 and 4 or 8
      if pos + size - 1 > last then return nil end
      out[#out + 1] = { number = number, wire = wire, first = pos, last = pos + size - 1, start = start }
      pos = pos + size
    else
      return nil
    end
    out[#out].stop = pos - 1
  end
  return out
end

local function text_of(bytes, f)
  if f.last < f.first then return "" end
  local t = {}
  for i = f.first, math.min(f.last, f.first + 39) do t[#t + 1] = string.char(bytes:get_index(i)) end
  return table.concat(t)
end

local function field_named(message, number)
  local m = schema.messages[message]
  return m and m[number]
end

local function first_field(fields, number)
  for _, f in ipairs(fields) do if f.number == number then return f end end
end

local function enum_name(enum, value)
  local e = schema.enums[enum]
  return (e and e[value]) or tostring(value)
end

-- A short description of a Template: "list 'library'".
local function describe_template(bytes, f)
  local inner = fields_of(bytes, f.first, f.last)
  if not inner then return "?" end
  local id, kind = "", nil
  for _, g in ipairs(inner) do
    local info = field_named("Template", g.number)
    if g.number == 1 and g.wire == 2 then id = text_of(bytes, g)
    elseif info and g.wire == 2 then kind = info.name end
  end
  return string.format("%s '%s'", kind or "template", id)
end

-- What one Envelope says, in a line: the body's message name and the gist of it.
local function summarize(bytes, first, last)
  local fields = fields_of(bytes, first, last)
  if not fields then return nil end
  local request_id, body = 0, nil
  for _, f in ipairs(fields) do
    if f.number == 1 and f.wire == 0 then request_id = f.value
    elseif f.wire == 2 then body = f end
  end
  if not body then return request_id, "(empty Envelope)", nil end
  local info = field_named("Envelope", body.number)
  if not info then return request_id, string.format("(unknown body %d)", body.number), nil end
  local name, detail, code = info.type, "", nil
  local inner = fields_of(bytes, body.first, body.last) or {}
  if name == "Result" or name == "Goodbye" then
    local c = first_field(inner, 1)
    code = enum_name("ErrorCode", c and c.value or 0)
    detail = " " .. code
    if name == "Result" then
      for _, g in ipairs(inner) do
        local gi = field_named("Result", g.number)
        if gi and g.number >= 10 and g.wire == 2 then
          detail = detail .. " " .. gi.name
          if gi.name == "template_shown" then
            local shown = fields_of(bytes, g.first, g.last) or {}
            local t = first_field(shown, 1)
            if t and t.wire == 2 then detail = detail .. " '" .. text_of(bytes, t) .. "'" end
          end
        end
      end
    end
    local reason = first_field(inner, 2)
    if reason and reason.wire == 2 and reason.last >= reason.first then detail = detail .. ": " .. text_of(bytes, reason) end
  elseif name == "TemplateRequest" then
    for _, g in ipairs(inner) do
      local gi = field_named("TemplateRequest", g.number)
      if gi and g.number >= 10 then
        if gi.type == "Template" then detail = string.format("{%s: %s}", gi.name, describe_template(bytes, g))
        elseif gi.type == "string" then detail = string.format("{%s: '%s'}", gi.name, text_of(bytes, g))
        else detail = string.format("{%s}", gi.name) end
      end
    end
  elseif name == "Hello" then
    local role = first_field(inner, 3)
    local who = first_field(inner, 4)
    detail = string.format("{%s%s}", enum_name("Role", role and role.value or 0), who and who.wire == 2 and (" '" .. text_of(bytes, who) .. "'") or "")
  elseif name == "Welcome" then
    local version = first_field(inner, 1)
    detail = string.format("{version %d}", version and version.value or 0)
  elseif name == "AppEvent" then
    local template = first_field(inner, 4)
    local where = template and template.wire == 2 and (" '" .. text_of(bytes, template) .. "'") or ""
    for _, g in ipairs(inner) do
      local gi = field_named("AppEvent", g.number)
      if gi and g.number >= 10 and g.wire == 2 then
        local what = gi.name
        if gi.type == "TemplateLifecycle" then
          local phase = first_field(fields_of(bytes, g.first, g.last) or {}, 1)
          what = enum_name("LifecyclePhase", phase and phase.value or 0)
        end
        detail = "{" .. what .. where .. "}"
      end
    end
  elseif name == "ScreenUpdate" then
    for _, g in ipairs(inner) do
      local gi = field_named("ScreenUpdate", g.number)
      if gi and g.number >= 10 and g.wire == 2 then detail = "{" .. gi.name .. "}" end
    end
  elseif name == "CloseSession" or name == "SessionCredit" or name == "SessionFinished" or name == "SessionClosed" then
    -- Accessory sessions (PROTOCOL.md 18): the channel, and a half-close,
    -- a grant's size or a close's reason.
    local at = (name == "CloseSession" or name == "SessionCredit") and 1 or 2
    local channel = first_field(inner, at)
    detail = string.format("{channel %d", channel and channel.value or 0)
    if name == "CloseSession" then
      local half = first_field(inner, 3)
      if half and half.value ~= 0 then detail = detail .. ", half" end
    elseif name == "SessionCredit" then
      local bytes_field = first_field(inner, 2)
      detail = detail .. string.format(", %d bytes", bytes_field and bytes_field.value or 0)
    elseif name == "SessionClosed" then
      local reason = first_field(inner, 4)
      detail = detail .. " " .. enum_name("SessionCloseReason", reason and reason.value or 0)
    end
    detail = detail .. "}"
  elseif name == "AssistantEvent" or name == "AssistantUpdate" then
    -- The phone's assistant (PROTOCOL.md 27): the session, then what
    -- happened (started, heard, ended) or the assistant's state.
    local session = first_field(inner, 1)
    detail = string.format("{session %d", session and session.value or 0)
    if name == "AssistantEvent" then
      for _, g in ipairs(inner) do
        local gi = field_named("AssistantEvent", g.number)
        if gi and g.number >= 2 and g.wire == 2 then detail = detail .. " " .. gi.name end
      end
    else
      local state = first_field(inner, 2)
      if state then detail = detail .. " " .. enum_name("AssistantState", state.value) end
      local ending = first_field(inner, 4)
      if ending and ending.value ~= 0 then detail = detail .. ", end" end
    end
    detail = detail .. "}"
  elseif name == "AnnounceApps" then
    local count = 0
    for _, g in ipairs(inner) do if g.number == 2 then count = count + 1 end end
    detail = string.format("{%d apps}", count)
  else
    -- Any other body: its first string field, e.g. LaunchApp{app_id 'com.example.radio'}.
    for _, g in ipairs(inner) do
      local gi = field_named(name, g.number)
      if gi and gi.type == "string" and g.wire == 2 then
        detail = string.format("{%s '%s'}", gi.name, text_of(bytes, g))
        break
      end
    end
  end
  return request_id, name .. detail, code
end

-- ---------------------------------------------------------------- the Envelope, field by field

local SIGNED = { int32 = true, int64 = true }
local ZIGZAG = { sint32 = true, sint64 = true }
local VARINT = { int32 = true, int64 = true, uint32 = true, uint64 = true, sint32 = true, sint64 = true, bool = true }

local function short_type(t) return t:match("([%w_]+)$") end

local function fixed_value(bytes, f, ftype)
  local range = ByteArray.tvb(bytes:subset(f.first, f.last - f.first + 1), "field")(0)
  if ftype == "float" then return string.format("%g", range:le_float())
  elseif ftype == "double" then return string.format("%g", range:le_float())
  elseif ftype == "sfixed32" then return tostring(range:le_int())
  elseif ftype == "fixed64" or ftype == "sfixed64" then return tostring(range:le_uint64())
  end
  return tostring(range:le_uint())
end

local scalar_text
function scalar_text(bytes, f, ftype)
  if f.wire == 0 then
    local v = f.value
    if schema.enums[ftype] then return string.format("%s (%d)", enum_name(ftype, v), v) end
    if ftype == "bool" then return v ~= 0 and "true" or "false" end
    if ZIGZAG[ftype] then return tostring((v % 2 == 0) and v / 2 or -(v + 1) / 2) end
    if SIGNED[ftype] and v >= 2 ^ 63 then return string.format("%.0f", v - 2 ^ 64) end
    return string.format("%.0f", v)
  elseif f.wire == 2 then
    local len = f.last - f.first + 1
    if ftype == "string" then
      local t = {}
      for i = f.first, math.min(f.last, f.first + 199) do t[#t + 1] = string.char(bytes:get_index(i)) end
      return "'" .. table.concat(t) .. "'" .. (len > 200 and "..." or "")
    end
    if len == 0 then return "(empty)" end
    if VARINT[ftype] or schema.enums[ftype] then
      -- A packed repeated scalar (proto3's default): varints one after another.
      local values, pos = {}, f.first
      while pos <= f.last and #values < 64 do
        local v
        v, pos = read_varint(bytes, pos, f.last)
        if not v then break end
        values[#values + 1] = scalar_text(bytes, { wire = 0, value = v }, ftype)
      end
      if pos > f.last then return "[" .. table.concat(values, ", ") .. "]" end
    end
    local hex = tostring(bytes:subset(f.first, math.min(len, 32)):tohex())
    return string.format("%s%s (%d bytes)", hex, len > 32 and "..." or "", len)
  end
  return fixed_value(bytes, f, ftype)
end

-- Adds the fields of message type `message` (bytes first..last of `payload`)
-- under `parent`, named from the .proto files; nested messages as subtrees.
local function add_message_tree(parent, payload, bytes, first, last, message, depth)
  local fields = fields_of(bytes, first, last)
  if not fields then parent:add(payload(first, last - first + 1), "(not a valid " .. message .. ")"); return end
  for _, f in ipairs(fields) do
    local info = field_named(message, f.number)
    local range = payload(f.start, f.stop - f.start + 1)
    if not info then
      parent:add(range, string.format("field %d (wire type %d, not in %s)", f.number, f.wire, message))
    else
      local ftype = short_type(info.type)
      if f.wire == 2 and schema.messages[ftype] then
        local item = parent:add(range, string.format("%s: %s", info.name, ftype))
        if depth < 16 then add_message_tree(item, payload, bytes, f.first, f.last, ftype, depth + 1) end
      else
        parent:add(range, string.format("%s: %s", info.name, scalar_text(bytes, f, ftype)))
      end
    end
  end
end

-- ---------------------------------------------------------------- frames

local protobuf = Dissector.get("protobuf")
headunit.prefs.protobuf = Pref.bool("Also show Wireshark's protobuf tree", false,
  "Call Wireshark's protobuf dissector on each Envelope as well. It names the fields only when "
  .. "Preferences > Protocols > ProtoBuf > Protobuf search paths holds this Protocol/ folder.")

local function dissect_frame(tvb, pinfo, tree)
  local length = tvb(8, 4):uint()
  local kind = tvb(2, 1):uint()
  local flags = tvb(3, 1):uint()
  local channel = tvb(4, 4):uint()
  local kind_name = KINDS[kind] or string.format("kind 0x%02x", kind)
  local subtree = tree:add(headunit, tvb(0, math.min(tvb:len(), HEADER + length)), string.format("headunitd %s, channel %d, %d bytes", kind_name, channel, length))
  local magic = subtree:add(f_magic, tvb(0, 2))
  if tvb(0, 2):string() ~= "HU" then magic:add_proto_expert_info(e_magic) end
  local k = subtree:add(f_kind, tvb(2, 1))
  if not KINDS[kind] then k:add_proto_expert_info(e_kind) end
  local fl = subtree:add(f_flags, tvb(3, 1))
  if flags ~= 0 then fl:add_proto_expert_info(e_flags) end
  local ch = subtree:add(f_channel, tvb(4, 4))
  if channel ~= 0 and kind ~= 4 and kind ~= 5 and kind ~= 6 then ch:add_proto_expert_info(e_channel) end
  local len = subtree:add(f_length, tvb(8, 4))
  if length > MAX_PAYLOAD then len:add_proto_expert_info(e_length) end

  local head = string.format("%s ch=%d len=%d", kind_name, channel, length)
  local info = head
  if length > 0 and tvb:len() >= HEADER + length then
    local payload = tvb(HEADER, length)
    subtree:add(f_payload, payload)
    if kind == 1 then
      local bytes = payload:bytes()
      local request_id, summary, code = summarize(bytes, 0, bytes:len() - 1)
      if summary then
        subtree:add(f_request, request_id)
        subtree:add(f_body, (summary:match("^[%w_%(%)]+") or summary))
        subtree:add(f_summary, summary)
        if code then
          local c = subtree:add(f_code, code)
          if code ~= "ERROR_CODE_OK" then c:add_proto_expert_info(e_error, code) end
        end
        info = head .. " " .. summary .. (request_id ~= 0 and string.format(" [req %d]", request_id) or "")
      else
        subtree:add_proto_expert_info(e_proto)
        info = head .. " (not a valid Envelope)"
      end
      if summary and schema.messages["Envelope"] then
        local envelope = subtree:add(payload, "Envelope")
        add_message_tree(envelope, payload, bytes, 0, bytes:len() - 1, "Envelope", 0)
      end
      if protobuf and headunit.prefs.protobuf then
        -- Wireshark's own protobuf tree as well (it needs the .proto search
        -- path, see docs/WIRESHARK.md); our columns stay as they are.
        local protocol, text = tostring(pinfo.cols.protocol), tostring(pinfo.cols.info)
        pinfo.private["pb_msg_type"] = "message,headunit.v1.Envelope"
        pcall(function() protobuf:call(payload:tvb(), pinfo, subtree) end)
        pinfo.cols.protocol:set(protocol)
        pinfo.cols.info:set(text)
      end
    elseif kind == 6 and length >= 16 then
      -- The video header only; the H.264 access unit stays opaque bytes.
      local number = payload(8, 4):uint()
      local key = bit.band(payload(12, 1):uint(), 1) == 1
      subtree:add(f_video_ts, payload(0, 8))
      subtree:add(f_video_number, payload(8, 4))
      subtree:add(f_video_key, payload(12, 1), key)
      info = head .. string.format(" frame %d%s", number, key and " keyframe" or "")
    elseif kind == 5 and length >= 8 then
      subtree:add(f_media_ts, payload(0, 8))
      info = head .. string.format(" audio %d bytes", length - 8)
    elseif kind == 2 or kind == 3 then
      if kind == 2 and length > 64 then subtree:add_proto_expert_info(e_ping) end
      -- At most 16 bytes of a ping's token in the Info column.
      local token = tostring(payload(0, math.min(length, 16)):bytes():tohex())
      info = head .. " " .. token .. (length > 16 and "..." or "")
    end
  elseif kind == 1 and length == 0 then
    info = head .. " (empty Envelope)"
  end
  return info
end

-- Several frames in one packet share its Info column: "... Hello{...} | ...".
-- TCP may call this dissector more than once for one packet (a reassembled
-- frame, then the frames after it in the same segment): the protocol column
-- already reading HEADUNIT means an earlier call of this pass wrote the Info.
local function show_info(pinfo, info)
  if tostring(pinfo.cols.protocol) == "HEADUNIT" then
    pinfo.cols.info:append(" | " .. info)
  else
    pinfo.cols.protocol = "HEADUNIT"
    pinfo.cols.info:set(info)
  end
end

local function dissect_pdu(tvb, pinfo, tree)
  local info = dissect_frame(tvb, pinfo, tree)
  show_info(pinfo, info)
  return tvb:len()
end

-- Splits the segment into frames and asks TCP for more bytes when a frame
-- (or its header) continues in the next segment.
function headunit.dissector(tvb, pinfo, tree)
  local total, offset = tvb:len(), 0
  while offset < total do
    local left = total - offset
    if left >= 2 and tvb(offset, 2):string() ~= "HU" then
      -- Not at a frame boundary with our magic: BAD_MAGIC, as the daemon would say.
      local item = tree:add(headunit, tvb(offset), "headunitd: not a frame header")
      item:add_proto_expert_info(e_magic)
      show_info(pinfo, "BAD_MAGIC (bytes that are not a headunitd frame)")
      return total
    end
    if left < HEADER then
      pinfo.desegment_offset = offset
      pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT
      return total
    end
    local length = HEADER + tvb(offset + 8, 4):uint()
    if length > HEADER + MAX_PAYLOAD then
      -- FRAME_TOO_LARGE: show the header and give up on the stream, as the daemon does.
      dissect_pdu(tvb(offset, HEADER):tvb(), pinfo, tree)
      return total
    end
    if left < length then
      pinfo.desegment_offset = offset
      pinfo.desegment_len = length - left
      return total
    end
    dissect_pdu(tvb(offset, length):tvb(), pinfo, tree)
    offset = offset + length
  end
  return total
end

-- A plausible first header: "HU", a known kind, flags 0, length within the
-- maximum; as much of it as the first segment holds (a header may be split).
local function plausible(tvb)
  local n = tvb:len()
  if n < 2 or tvb(0, 2):string() ~= "HU" then return false end
  if n >= 3 and not KINDS[tvb(2, 1):uint()] then return false end
  if n >= 4 and tvb(3, 1):uint() ~= 0 then return false end
  if n >= HEADER and tvb(8, 4):uint() > MAX_PAYLOAD then return false end
  return true
end

local function heuristic(tvb, pinfo, tree)
  if not plausible(tvb) then return false end
  pinfo.conversation = headunit
  headunit.dissector(tvb, pinfo, tree)
  return true
end

-- Inside TLS: setting the TCP conversation here would take the stream away
-- from TLS, so the TLS streams found to carry frames are remembered by TCP
-- stream number, and every later record of theirs (a malformed header
-- included, as the daemon would read it) comes here.
local f_tcp_stream = Field.new("tcp.stream")
local tls_streams = {}
local function heuristic_tls(tvb, pinfo, tree)
  local stream = f_tcp_stream()
  local key = stream and stream.value
  if not (key and tls_streams[key]) then
    if not plausible(tvb) then return false end
    if key then tls_streams[key] = true end
  end
  headunit.dissector(tvb, pinfo, tree)
  return true
end
function headunit.init()
  tls_streams = {}
end

DissectorTable.get("tcp.port"):add(7420, headunit)
headunit:register_heuristic("tcp", heuristic)
headunit:register_heuristic("tls", heuristic_tls)
