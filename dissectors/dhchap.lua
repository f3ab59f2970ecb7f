-- NVMe in-band authentication (DH-HMAC-CHAP) for Wireshark, over NVMe/TCP and NVMe/RDMA (RoCE).
--
-- Tested with: Wireshark/tshark 4.0.17 (Debian 12).  It reads the running version at
-- load and names it, with the tested ones, in every message it decodes ("Decoded by");
-- where that Wireshark registers a DH-HMAC-CHAP field of its own, it steps aside and
-- says so once on stderr.
--
-- Wireshark 4.0 names the Authentication Send (fctype 0x05) and Receive (0x06)
-- fabrics commands but not the messages their data carries.  This plugin decodes
-- every field of AUTH_Negotiate, DH-HMAC-CHAP_Challenge, _Reply, _Success1,
-- _Success2, and AUTH_Failure1 and _Failure2 (NVMe Base 2.0, 8.13.5; Linux's
-- include/linux/nvme.h struct nvmf_auth_dhchap_*), the hash and DH group a
-- Challenge settles on, and whether the transaction succeeded.  A failure is
-- expert info naming the step and the reason.
--
-- Where the messages are: over NVMe/TCP, an Authentication Send's message is the
-- command capsule's in-capsule data and an Authentication Receive's is the C2HData
-- PDU that answers it (by command identifier).  A postdissector frames each
-- NVMe/TCP direction on port 4420 from its first byte for its first PDUs (the
-- exchange follows Connect; I/O data is never held), so a message split over
-- segments is decoded whole, in a tab of its own.  Over RoCE, the target fetches
-- an admin queue's Send data with an RDMA READ and writes Receive data with an
-- RDMA WRITE; a message is recognised at the start of a READ Response or WRITE
-- (First or Only) by its header, checked field by field, and inline in an I/O
-- queue's SEND after the 64-byte command.  Filter prefix: sanlab_dhchap.

local TESTED_WITH = { "4.0.17" }
local running = get_version()

-- A DH-HMAC-CHAP field of Wireshark's own: looked for once every dissector has registered
-- its fields (init, before a file is read), not at load, when other plugins' are not yet in.
local function native_field()
  local ok, names = pcall(Field.list)
  if not ok then return nil end
  for _, name in ipairs(names) do
    if name:match("^nvme") and name:lower():match("dhchap") then return name end
  end
  return nil
end
local tested = false
for _, v in ipairs(TESTED_WITH) do tested = tested or v == running end
local stance = "tested with Wireshark " .. table.concat(TESTED_WITH, ", ") .. "; running " .. running
  .. (tested and "" or " (untested)")
local dhchap = Proto("sanlab_dhchap", "NVMe DH-HMAC-CHAP authentication (sanlab)")
local native = nil  -- set by init: the native field, if this Wireshark has one

local MESSAGES = {
  [0x00] = "AUTH_Negotiate", [0x01] = "DH-HMAC-CHAP_Challenge", [0x02] = "DH-HMAC-CHAP_Reply",
  [0x03] = "DH-HMAC-CHAP_Success1", [0x04] = "DH-HMAC-CHAP_Success2",
  [0xf0] = "AUTH_Failure2", [0xf1] = "AUTH_Failure1",
}
local AUTH_TYPES = { [0x00] = "common message", [0x01] = "DH-HMAC-CHAP message" }
local HASHES = { [0x01] = "SHA-256", [0x02] = "SHA-384", [0x03] = "SHA-512" }
local HASH_LEN = { [0x01] = 32, [0x02] = 48, [0x03] = 64 }
local DH_GROUPS = {
  [0x00] = "null (no DH)", [0x01] = "ffdhe2048", [0x02] = "ffdhe3072", [0x03] = "ffdhe4096",
  [0x04] = "ffdhe6144", [0x05] = "ffdhe8192",
}
local AUTH_IDS = { [0x01] = "DH-HMAC-CHAP" }
local SC_C = { [0x00] = "no secure channel concatenation", [0x01] = "new TLS", [0x02] = "replace TLS" }
local REASONS = { [0x01] = "authentication failed" }
local EXPLANATIONS = {
  [0x01] = "failed (the response did not verify)", [0x02] = "authentication protocol not usable",
  [0x03] = "secure channel concatenation mismatch", [0x04] = "hash function not usable",
  [0x05] = "DH group not usable", [0x06] = "incorrect payload", [0x07] = "incorrect protocol message",
}
local DIRECTIONS = { [0x05] = "Authentication Send (host to controller)",
  [0x06] = "Authentication Receive (controller to host)" }

local f = {
  message = ProtoField.uint8("sanlab_dhchap.message", "Message", base.HEX, MESSAGES),
  auth_type = ProtoField.uint8("sanlab_dhchap.auth_type", "AUTH-Type", base.HEX, AUTH_TYPES),
  auth_id = ProtoField.uint8("sanlab_dhchap.auth_id", "AUTH-Id", base.HEX, MESSAGES),
  rsvd = ProtoField.bytes("sanlab_dhchap.reserved", "Reserved"),
  t_id = ProtoField.uint16("sanlab_dhchap.t_id", "Transaction ID (T_ID)", base.DEC),
  sc_c = ProtoField.uint8("sanlab_dhchap.sc_c", "Secure channel concatenation (SC_C)", base.HEX, SC_C),
  napd = ProtoField.uint8("sanlab_dhchap.napd", "Protocol descriptors (NAPD)", base.DEC),
  desc_authid = ProtoField.uint8("sanlab_dhchap.desc.authid", "Protocol (AUTHID)", base.HEX, AUTH_IDS),
  desc_halen = ProtoField.uint8("sanlab_dhchap.desc.halen", "Hash IDs (HALEN)", base.DEC),
  desc_dhlen = ProtoField.uint8("sanlab_dhchap.desc.dhlen", "DH group IDs (DHLEN)", base.DEC),
  desc_hash = ProtoField.uint8("sanlab_dhchap.desc.hash", "Hash offered", base.HEX, HASHES),
  desc_dhgroup = ProtoField.uint8("sanlab_dhchap.desc.dhgroup", "DH group offered", base.HEX, DH_GROUPS),
  hl = ProtoField.uint8("sanlab_dhchap.hl", "Hash length (HL)", base.DEC),
  hashid = ProtoField.uint8("sanlab_dhchap.hashid", "Hash (HASHID)", base.HEX, HASHES),
  dhgid = ProtoField.uint8("sanlab_dhchap.dhgid", "DH group (DHGID)", base.HEX, DH_GROUPS),
  dhvlen = ProtoField.uint16("sanlab_dhchap.dhvlen", "DH value length (DHVLEN)", base.DEC),
  seqnum = ProtoField.uint32("sanlab_dhchap.seqnum", "Sequence number (SEQNUM)", base.DEC),
  cval = ProtoField.bytes("sanlab_dhchap.cval", "Challenge value (C1/C2)"),
  rval = ProtoField.bytes("sanlab_dhchap.rval", "Response value (R1/R2)"),
  dhv = ProtoField.bytes("sanlab_dhchap.dhv", "DH value"),
  cvalid = ProtoField.uint8("sanlab_dhchap.cvalid", "Controller challenge valid (CVALID)", base.DEC),
  rvalid = ProtoField.uint8("sanlab_dhchap.rvalid", "Response valid (RVALID)", base.DEC),
  rescode = ProtoField.uint8("sanlab_dhchap.rescode", "Reason code", base.HEX, REASONS),
  rescode_exp = ProtoField.uint8("sanlab_dhchap.rescode_exp", "Reason code explanation", base.HEX, EXPLANATIONS),
  direction = ProtoField.uint8("sanlab_dhchap.command", "Carried by", base.HEX, DIRECTIONS),
  cid = ProtoField.uint16("sanlab_dhchap.cid", "Command identifier", base.HEX),
  outcome = ProtoField.string("sanlab_dhchap.outcome", "Outcome"),
  plugin = ProtoField.string("sanlab_dhchap.plugin", "Decoded by"),
}
dhchap.fields = f
local e_fail = ProtoExpert.new("sanlab_dhchap.failure", "DH-HMAC-CHAP failed",
  expert.group.SECURITY, expert.severity.WARN)
local e_short = ProtoExpert.new("sanlab_dhchap.short", "DH-HMAC-CHAP message shorter than its fields say",
  expert.group.MALFORMED, expert.severity.ERROR)
dhchap.experts = { e_fail, e_short }

-- Is this the start of a DH-HMAC-CHAP message (a ByteArray)?  Every fixed field checked,
-- so block data (all zeros, say) is never taken for one.
local function plausible(ba)
  local n = ba:len()
  local function u8(i) return ba:get_index(i) end
  if n < 8 or u8(2) ~= 0 or u8(3) ~= 0 then return false end
  local kind, id = u8(0), u8(1)
  -- AUTH_Failure1/2 are common messages (AUTH-Type 0, as Linux's nvmet sends them); a
  -- DH-HMAC-CHAP-typed one is taken too
  if id == 0xf0 or id == 0xf1 then
    return kind <= 0x01 and u8(6) == 0x01 and EXPLANATIONS[u8(7)] ~= nil
  end
  if kind == 0x00 then
    if id ~= 0x00 or n < 72 then return false end
    local napd = u8(7)
    return napd >= 1 and napd <= 8 and u8(8) == 0x01 and u8(10) <= 30 and u8(11) <= 30
  end
  if kind ~= 0x01 or not MESSAGES[id] then return false end
  if n < 16 then return false end
  if id == 0x04 then return true end
  local hl = u8(6)
  if id == 0x03 then return hl == 0 or hl == 32 or hl == 48 or hl == 64 end
  if hl ~= 32 and hl ~= 48 and hl ~= 64 then return false end
  if id == 0x01 then return HASH_LEN[u8(8)] == hl and DH_GROUPS[u8(9)] ~= nil end
  return u8(8) <= 1  -- Reply: CVALID is 0 or 1
end

local function need(tvb, tree, size)
  if tvb:len() >= size then return true end
  tree:add_proto_expert_info(e_short, string.format("needs %d bytes, has %d", size, tvb:len()))
  return false
end

local function negotiate(tvb, t)
  t:add(f.sc_c, tvb(6, 1)); t:add(f.napd, tvb(7, 1))
  local offered = {}
  for i = 0, tvb(7, 1):uint() - 1 do
    local at = 8 + 64 * i
    if not need(tvb, t, at + 64) then break end
    local d = t:add(dhchap, tvb(at, 64), "Protocol descriptor " .. i)
    d:add(f.desc_authid, tvb(at, 1)); d:add(f.rsvd, tvb(at + 1, 1))
    local halen, dhlen = tvb(at + 2, 1):uint(), tvb(at + 3, 1):uint()
    d:add(f.desc_halen, tvb(at + 2, 1)); d:add(f.desc_dhlen, tvb(at + 3, 1))
    for k = 0, halen - 1 do d:add(f.desc_hash, tvb(at + 4 + k, 1)) end
    for k = 0, dhlen - 1 do d:add(f.desc_dhgroup, tvb(at + 34 + k, 1)) end
    offered[#offered + 1] = string.format("%d hashes, %d DH groups", halen, dhlen)
  end
  return "offers " .. table.concat(offered, "; ")
end

local function challenge(tvb, t)
  local hl, dhvlen = tvb(6, 1):uint(), tvb(10, 2):le_uint()
  t:add(f.hl, tvb(6, 1)); t:add(f.rsvd, tvb(7, 1))
  t:add(f.hashid, tvb(8, 1)); t:add(f.dhgid, tvb(9, 1))
  t:add_le(f.dhvlen, tvb(10, 2)); t:add_le(f.seqnum, tvb(12, 4))
  if need(tvb, t, 16 + hl + dhvlen) then
    t:add(f.cval, tvb(16, hl))
    if dhvlen > 0 then t:add(f.dhv, tvb(16 + hl, dhvlen)) end
  end
  local hash, group = HASHES[tvb(8, 1):uint()] or "?", DH_GROUPS[tvb(9, 1):uint()] or "?"
  t:add(f.outcome, string.format("negotiated: hash %s, DH group %s", hash, group)):set_generated()
  return string.format("%s, DH group %s", hash, group)
end

local function reply(tvb, t)
  local hl, cvalid, dhvlen = tvb(6, 1):uint(), tvb(8, 1):uint(), tvb(10, 2):le_uint()
  t:add(f.hl, tvb(6, 1)); t:add(f.rsvd, tvb(7, 1)); t:add(f.cvalid, tvb(8, 1)); t:add(f.rsvd, tvb(9, 1))
  t:add_le(f.dhvlen, tvb(10, 2)); t:add_le(f.seqnum, tvb(12, 4))
  if need(tvb, t, 16 + 2 * hl + dhvlen) then
    t:add(f.rval, tvb(16, hl))
    t:add(f.cval, tvb(16 + hl, hl))  -- zeros when CVALID is 0 (no controller authentication)
    if dhvlen > 0 then t:add(f.dhv, tvb(16 + 2 * hl, dhvlen)) end
  end
  return cvalid == 1 and "asks the controller to authenticate too" or "host only"
end

local function success1(tvb, t)
  local hl, rvalid = tvb(6, 1):uint(), tvb(8, 1):uint()
  t:add(f.hl, tvb(6, 1)); t:add(f.rsvd, tvb(7, 1)); t:add(f.rvalid, tvb(8, 1)); t:add(f.rsvd, tvb(9, 7))
  if rvalid == 1 and need(tvb, t, 16 + hl) then t:add(f.rval, tvb(16, hl)) end
  t:add(f.outcome, "the controller accepted the host's response"):set_generated()
  return "host authenticated"
end

local function failure(tvb, t, id)
  t:add(f.rescode, tvb(6, 1)); t:add(f.rescode_exp, tvb(7, 1))
  local why = EXPLANATIONS[tvb(7, 1):uint()] or "unknown reason"
  local who = id == 0xf1 and "the controller refused the host's Reply" or "the host refused the controller"
  t:add(f.outcome, "FAILED: " .. who .. ": " .. why):set_generated()
  t:add_proto_expert_info(e_fail, "DH-HMAC-CHAP failed: " .. who .. ": " .. why)
  return "FAILED: " .. why
end

-- Decode one message; return its name and what it says, for the Info column.
local function decode(tvb, pinfo, root, fctype, cid)
  local id = tvb(1, 1):uint()
  local name = MESSAGES[id] or "?"
  local t = root:add(dhchap, tvb(), "NVMe DH-HMAC-CHAP, " .. name)
  t:add(f.plugin, "sanlab dhchap.lua, " .. stance):set_generated()
  if fctype then t:add(f.direction, fctype):set_generated() end
  if cid then t:add(f.cid, cid):set_generated() end
  t:add(f.message, tvb(1, 1)):set_generated()
  t:add(f.auth_type, tvb(0, 1)); t:add(f.auth_id, tvb(1, 1)); t:add(f.rsvd, tvb(2, 2))
  t:add_le(f.t_id, tvb(4, 2))
  local said = ""
  if id == 0x00 then said = negotiate(tvb, t)
  elseif id == 0x01 then said = challenge(tvb, t)
  elseif id == 0x02 then said = reply(tvb, t)
  elseif id == 0x03 then said = success1(tvb, t)
  elseif id == 0x04 then
    t:add(f.rsvd, tvb(6, 10))
    t:add(f.outcome, "authenticated (the host accepted the controller, or needed not)"):set_generated()
    said = "done"
  else said = failure(tvb, t, id) end
  local text = string.format("%s (T_ID %d) %s", name, tvb(4, 2):le_uint(), said)
  pinfo.cols.info:append(" | " .. text)
  return text
end

-- NVMe/TCP: each direction of a port-4420 connection framed by PLEN, for its first PDUs.
local NVME_PORT, MAX_PDUS, MAX_HELD = 4420, 64, 1048576
local f_tcp, f_seq, f_len, f_stream = Field.new("tcp"), Field.new("tcp.seq"), Field.new("tcp.len"),
  Field.new("tcp.stream")
local f_hdr = Field.new("tcp.hdr_len")
local dirs, found, receives = {}, {}, {}  -- per direction state; frame -> messages; conn -> CIDs
local auth_seen = false  -- an Authentication Send or Receive command seen (RoCE, below)
function dhchap.init()
  dirs, found, receives, auth_seen = {}, {}, {}, false
  local was = native
  native = native_field()
  if native and not was then  -- say so once, on stderr (stdout may be tshark's fields)
    io.stderr:write("sanlab dhchap.lua: stepped aside: this Wireshark decodes DH-HMAC-CHAP (" .. native .. ")\n")
  end
end

local function le(ba, at, size)
  local v = 0
  for i = size - 1, 0, -1 do v = v * 256 + ba:get_index(at + i) end
  return v
end

local function take_pdu(pdu, conn, number)
  local kind, pdo = pdu:get_index(0), pdu:get_index(3)
  local plen = pdu:len()
  if kind == 4 and plen >= 72 and pdu:get_index(8) == 0x7f then  -- CapsuleCmd, fabrics
    local fctype, cid = pdu:get_index(12), le(pdu, 10, 2)
    if fctype == 0x06 then receives[conn .. ":" .. cid] = true end
    if fctype == 0x05 and pdo > 0 and plen > pdo then
      found[number] = found[number] or {}
      table.insert(found[number], { pdu:subset(pdo, plen - pdo), 0x05, cid })
    end
  elseif kind == 7 and plen >= 24 and pdo > 0 then  -- C2HData: an Auth Receive's answer?
    local cid, len = le(pdu, 8, 2), le(pdu, 16, 4)  -- CCCID, DATAL
    if receives[conn .. ":" .. cid] and plen >= pdo + len then
      receives[conn .. ":" .. cid] = nil
      found[number] = found[number] or {}
      table.insert(found[number], { pdu:subset(pdo, len), 0x06, cid })
    end
  end
end

local function frame_tcp(tvb, pinfo)
  local tcp, seq, len = f_tcp(), f_seq(), f_len()
  if not (tcp and seq and len) or len.value == 0 then return end
  if pinfo.src_port ~= NVME_PORT and pinfo.dst_port ~= NVME_PORT then return end
  local conn = tostring(f_stream().value)
  local key = conn .. ">" .. tostring(pinfo.src) .. ":" .. pinfo.src_port
  local d = dirs[key]
  if d == nil then
    d = { buf = ByteArray.new(), at = seq.value, pdus = 0, done = false }
    dirs[key] = d
  end
  if d.done then return end
  local start = tcp.offset + f_hdr().value
  if seq.value + len.value <= d.at or seq.value > d.at or start + len.value > tvb:len() then
    if seq.value > d.at then d.done = true end  -- a gap: PDU boundaries are lost, stop here
    return
  end
  local skip = d.at - seq.value  -- a retransmission overlapping what was taken
  d.buf = d.buf .. tvb(start + skip, len.value - skip):bytes()
  d.at = seq.value + len.value
  while d.buf:len() >= 8 do
    local plen = le(d.buf, 4, 4)
    if plen < 8 then d.done = true; return end
    if d.buf:len() < plen then break end
    take_pdu(d.buf:subset(0, plen), conn, pinfo.number)
    d.buf = d.buf:len() > plen and d.buf:subset(plen, d.buf:len() - plen) or ByteArray.new()
    d.pdus = d.pdus + 1
  end
  if d.pdus >= MAX_PDUS or d.buf:len() > MAX_HELD then d.done = true; d.buf = ByteArray.new() end
end

-- RoCE: RDMA WRITE First/Only and READ Response First/Only payloads that begin with a message,
-- once the capture has shown an Authentication Send or Receive; and an I/O queue's inline Send.
-- Wireshark's NVMe/RDMA dissector takes these payloads (no infiniband.payload is left), so they
-- are read from the frame: past the BTH and the RETH (WRITE) or AETH (READ Response), before
-- the ICRC.
local f_ib, f_bth = Field.new("infiniband"), Field.new("infiniband.bth.opcode")
local f_fctype = Field.new("nvme.fabrics.cmd.fctype")
local BTH, ICRC = 12, 4
local AFTER_BTH = {  -- opcode -> extended headers before the payload; reads its data as
  [6] = { 16, 0x06 }, [10] = { 16, 0x06 }, [11] = { 20, 0x06 },  -- RDMA WRITE First/Only(/Imm)
  [13] = { 4, 0x05 }, [16] = { 4, 0x05 },  -- RDMA READ Response First/Only: the host's Send data
}
local SENDS = { [0] = 0, [4] = 0, [5] = 4 }  -- SEND First, Only, Only with Immediate

local function rdma_message(tvb)
  local ib, bth = f_ib(), f_bth()
  if not (ib and bth) then return nil end
  local fctypes = { f_fctype() }
  for _, fc in ipairs(fctypes) do
    if fc.value == 0x05 or fc.value == 0x06 then auth_seen = true end
  end
  local op = bth.value
  local payload = function(skip)
    local at = ib.offset + BTH + skip
    local n = ib.offset + ib.len - ICRC - at
    if n < 8 or at + n > tvb:len() then return nil end
    return tvb(at, n):bytes()
  end
  if SENDS[op] and #fctypes > 0 and fctypes[1].value == 0x05 then  -- inline after the SQE
    local bytes = payload(SENDS[op])
    if bytes and bytes:len() > 64 + 8 then return bytes:subset(64, bytes:len() - 64), 0x05 end
  end
  if auth_seen and AFTER_BTH[op] then
    return payload(AFTER_BTH[op][1]), AFTER_BTH[op][2]
  end
  return nil
end

function dhchap.dissector(tvb, pinfo, root)
  if native then return end
  if not pinfo.visited then frame_tcp(tvb, pinfo) end
  local messages = found[pinfo.number]
  if messages == nil and not pinfo.visited then
    local bytes, fctype = rdma_message(tvb)
    if bytes and plausible(bytes) then
      messages = { { bytes, fctype, nil } }
      found[pinfo.number] = messages
    end
  end
  if messages == nil then return end
  for _, m in ipairs(messages) do
    if plausible(m[1]) then decode(m[1]:tvb("DH-HMAC-CHAP"), pinfo, root, m[2], m[3]) end
  end
end

register_postdissector(dhchap)
