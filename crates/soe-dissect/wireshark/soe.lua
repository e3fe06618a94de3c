-- soe.lua: shows the application messages `soe decode --export` and `soe proxy --export`
-- write (pcapng, exported PDUs, link type 252) in Wireshark.
--
-- Every SOE rule (CRC, compression, reassembly, RC4) stays in soe-dissect: this plugin reads
-- only the fixed header soe-dissect puts ahead of each message (see soe_dissect::export), and
-- hands the message to the "soe.protocol" dissector table, keyed by the session's application
-- protocol name (e.g. "ExternalGatewayApi_3"), where a game's dissector can register:
--
--     DissectorTable.get("soe.protocol"):add("ExternalGatewayApi_3", my_game_proto)
--
-- Install: copy it into the personal plugins folder (Help > About > Folders), e.g.
--     mkdir -p ~/.local/lib/wireshark/plugins && cp soe.lua ~/.local/lib/wireshark/plugins/
-- or load it for one run: tshark -X lua_script:soe.lua -r export.pcapng

local soe = Proto("soe", "SOE (v3) application message")

local directions = { [0] = "unknown", [1] = "client to server", [2] = "server to client" }
-- Kinds 3 and 4 are no message: a flight recording's end (the reason) and framing (text).
local kinds = {
    [0] = "reliable", [1] = "unreliable", [2] = "ordered", [3] = "disconnect", [4] = "session",
}
local crcs = { [0] = "unknown", [1] = "ok", [2] = "bad", [3] = "none", [4] = "missing" }
local verdicts = {
    [0] = "unknown", [1] = "plaintext", [2] = "looks encrypted", [3] = "key not judged",
    [4] = "decrypted", [5] = "key does not fit",
}

local f = {
    version = ProtoField.uint8("soe.version", "Header version"),
    direction = ProtoField.uint8("soe.direction", "Direction", base.DEC, directions),
    channel = ProtoField.uint8("soe.channel", "Channel"),
    kind = ProtoField.uint8("soe.kind", "Kind", base.DEC, kinds),
    session = ProtoField.uint32("soe.session", "Session"),
    seq = ProtoField.uint16("soe.seq", "Sequence"),
    flags = ProtoField.uint16("soe.flags", "Flags", base.HEX),
    has_seq = ProtoField.bool("soe.has_seq", "Has a sequence", 16, nil, 0x01),
    fragmented = ProtoField.bool("soe.fragmented", "Fragmented", 16, nil, 0x02),
    compressed = ProtoField.bool("soe.compressed", "Compressed", 16, nil, 0x04),
    encrypted = ProtoField.bool("soe.encrypted", "Encrypted", 16, nil, 0x08),
    decrypted = ProtoField.bool("soe.decrypted", "Decrypted", 16, nil, 0x10),
    truncated = ProtoField.bool("soe.truncated", "Truncated", 16, nil, 0x20),
    crc = ProtoField.uint8("soe.crc", "CRC", base.DEC, crcs),
    key = ProtoField.uint8("soe.key", "Key verdict", base.DEC, verdicts),
    first_frame = ProtoField.uint32("soe.first_frame", "First frame"),
    last_frame = ProtoField.uint32("soe.last_frame", "Last frame"),
    len = ProtoField.uint32("soe.len", "Message length"),
    protocol = ProtoField.string("soe.protocol", "Application protocol"),
    body = ProtoField.bytes("soe.body", "Message"),
    reason = ProtoField.string("soe.reason", "Disconnect reason"),
    reason_code = ProtoField.uint16("soe.reason_code", "Disconnect reason code"),
    framing = ProtoField.string("soe.framing", "Session framing"),
}
soe.fields = {
    f.version, f.direction, f.channel, f.kind, f.session, f.seq, f.flags, f.has_seq,
    f.fragmented, f.compressed, f.encrypted, f.decrypted, f.truncated, f.crc, f.key, f.first_frame,
    f.last_frame, f.len, f.protocol, f.body, f.reason, f.reason_code, f.framing,
}

local HEADER_LEN = 28
local bad_header = ProtoExpert.new("soe.bad_header", "Not an soe-dissect header",
    expert.group.MALFORMED, expert.severity.ERROR)
-- A message longer than a record may be (Wireshark's 262,144 bytes) is cut, flagged 0x20, its
-- length field still the whole message's.
local truncated = ProtoExpert.new("soe.truncated.expert",
    "Message truncated to fit a record: the length is the whole message's",
    expert.group.UNDECODED, expert.severity.NOTE)
local bad_length = ProtoExpert.new("soe.bad_length",
    "The message length does not match the bytes the record holds",
    expert.group.MALFORMED, expert.severity.ERROR)
soe.experts = { bad_header, truncated, bad_length }

-- Game dissectors register here by application protocol name.
local games = DissectorTable.new("soe.protocol", "SOE application protocol", ftypes.STRING,
    base.NONE, soe)

function soe.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "SOE"
    local root = tree:add(soe, tvb())
    if tvb:len() < HEADER_LEN or tvb(0, 1):uint() ~= 1 then
        root:add_proto_expert_info(bad_header)
        return
    end
    local name_len = tvb(14, 1):uint()
    local body_at = HEADER_LEN + name_len
    if tvb:len() < body_at then
        root:add_proto_expert_info(bad_header)
        return
    end
    root:add(f.version, tvb(0, 1))
    root:add(f.session, tvb(4, 4))
    root:add(f.direction, tvb(1, 1))
    root:add(f.channel, tvb(2, 1))
    root:add(f.kind, tvb(3, 1))
    local flags = tvb(10, 2):uint()
    if bit.band(flags, 0x01) ~= 0 then
        root:add(f.seq, tvb(8, 2))
    end
    local flag_tree = root:add(f.flags, tvb(10, 2))
    for _, field in ipairs({ f.has_seq, f.fragmented, f.compressed, f.encrypted, f.decrypted,
        f.truncated }) do
        flag_tree:add(field, tvb(10, 2))
    end
    root:add(f.crc, tvb(12, 1))
    root:add(f.key, tvb(13, 1))
    root:add(f.first_frame, tvb(16, 4))
    root:add(f.last_frame, tvb(20, 4))
    local len_item = root:add(f.len, tvb(24, 4))
    local protocol = ""
    if name_len > 0 then
        protocol = tvb(HEADER_LEN, name_len):string()
        root:add(f.protocol, tvb(HEADER_LEN, name_len))
    end
    local body = tvb(body_at):tvb()
    if body:len() > 0 then
        root:add(f.body, tvb(body_at))
    end
    -- The header's length against the bytes this record holds: all of them, or (flag 0x20)
    -- fewer, the message's start.
    local message_len = tvb(24, 4):uint()
    local is_truncated = bit.band(flags, 0x20) ~= 0
    if is_truncated and body:len() < message_len then
        len_item:add_proto_expert_info(truncated,
            string.format("Message truncated: %d of its %d bytes in this record", body:len(),
                message_len))
    elseif body:len() ~= message_len then
        len_item:add_proto_expert_info(bad_length,
            string.format("The header says %d bytes, the record holds %d", message_len,
                body:len()))
    end

    local direction = ({ [1] = "C->S", [2] = "S->C" })[tvb(1, 1):uint()] or "?"
    local kind = tvb(3, 1):uint()
    if kind == 3 or kind == 4 then
        -- A flight recording's end, or its framing: text, no message.
        local text = body:len() > 0 and tvb(body_at):string() or ""
        if kind == 3 then
            root:add(f.reason, tvb(body_at))
            root:add(f.reason_code, tvb(8, 2))
            local by = ({ [1] = "the client", [2] = "the server" })[tvb(1, 1):uint()] or "?"
            pinfo.cols.info = string.format("session %d disconnect: %s (%d), ended by %s",
                tvb(4, 4):uint(), text, tvb(8, 2):uint(), by)
        else
            root:add(f.framing, tvb(body_at))
            pinfo.cols.info = string.format("session %d framing: %s", tvb(4, 4):uint(), text)
        end
        if protocol ~= "" then
            pinfo.cols.protocol = "SOE " .. protocol
        end
        return tvb:len()
    end
    local info = string.format("session %d %s ch %d", tvb(4, 4):uint(), direction,
        tvb(2, 1):uint())
    if bit.band(flags, 0x01) ~= 0 then
        info = info .. string.format(" seq %d", tvb(8, 2):uint())
    end
    info = info .. string.format(" %s len %d", kinds[tvb(3, 1):uint()] or "?", tvb(24, 4):uint())
    for _, flag in ipairs({ { 0x02, "fragmented" }, { 0x04, "compressed" }, { 0x10, "decrypted" },
        { 0x20, "truncated" } }) do
        if bit.band(flags, flag[1]) ~= 0 then
            info = info .. " [" .. flag[2] .. "]"
        end
    end
    if protocol ~= "" then
        pinfo.cols.protocol = "SOE " .. protocol
    end
    pinfo.cols.info = info

    if protocol ~= "" and body:len() > 0 then
        games:try(protocol, body, pinfo, tree)
    end
    return tvb:len()
end
