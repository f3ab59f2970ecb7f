-- iWARP (MPA / DDP / RDMAP) with iSER and NVMe-oF payloads, for Wireshark 4.0+.
--
-- Tested with: Wireshark/tshark 4.0.17 (Debian 12).  Its hand-off of NVMe/TCP
-- inside TLS to Wireshark's TLS dissector steps aside where Wireshark registers
-- "nvme-tls" itself (it does in its newer releases); the MPA, DDP/RDMAP, iSER and
-- NVMe/RDMA decoding stays, since sanlab's analyser reads its fields.
--
-- soft-iWARP (siw) speaks MPA revision 2 (RFC 6581), which Wireshark 4.0's
-- MPA dissector predates, so nothing after the start-up is decoded.  This
-- dissector recognises the MPA request/reply frames (revision 1 or 2), takes
-- the TCP conversation, and splits the stream into FPDUs (length, ULPDU,
-- pad, CRC32c).  Each FPDU's DDP/RDMAP header is decoded (tagged: STag and
-- tagged offset; untagged: queue, MSN, message offset), and the payload of a
-- SEND is decoded as iSER (header + iSCSI BHS) or as an NVMe-oF capsule (a
-- 64-byte command or a 16-byte completion) by its TCP port.  Truncated or
-- inconsistent frames get expert info, never a Lua error.
--
-- TCP port 4420 belongs to Wireshark's NVMe/TCP dissector, which would take
-- an MPA frame for the start of a huge PDU and swallow the stream.  So this
-- plugin takes the port, keeps the streams that begin with an MPA frame, and
-- hands every other stream back to NVMe/TCP - with its TCP reassembly
-- budget restored, which a dissector called one layer down would lose.

-- The READ/WRITE CDB decoding shared with the other plugin (scsi.lua beside this file,
-- named sanlab-scsi.lua once installed).
local sanlab_scsi = (function()
  local here = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""
  for _, name in ipairs({ "scsi.lua", "sanlab-scsi.lua" }) do
    local ok, module = pcall(dofile, here .. name)
    if ok and type(module) == "table" then return module end
  end
  return { read_write = function() return nil end }
end)()

local iwarp = Proto("sanlab_iwarp", "iWARP (MPA/DDP/RDMAP)")
local iser = Proto("sanlab_iser", "iSER over iWARP")
local nvmeof = Proto("sanlab_nvmeof", "NVMe-oF over iWARP")

local rdmap_ops = {
  [0] = "RDMA Write", [1] = "RDMA Read Request", [2] = "RDMA Read Response", [3] = "Send",
  [4] = "Send with Invalidate", [5] = "Send with SE", [6] = "Send with SE and Invalidate",
  [7] = "Terminate",
}

local f = iwarp.fields
f.mpa_key = ProtoField.string("sanlab_iwarp.mpa.key", "MPA key")
f.mpa_flags = ProtoField.uint8("sanlab_iwarp.mpa.flags", "MPA flags", base.HEX)
f.mpa_marker = ProtoField.bool("sanlab_iwarp.mpa.markers", "Markers", 8, nil, 0x80)
f.mpa_crc_flag = ProtoField.bool("sanlab_iwarp.mpa.crc", "CRC", 8, nil, 0x40)
f.mpa_reject = ProtoField.bool("sanlab_iwarp.mpa.reject", "Reject", 8, nil, 0x20)
f.mpa_rev = ProtoField.uint8("sanlab_iwarp.mpa.rev", "MPA revision")
f.mpa_pd_len = ProtoField.uint16("sanlab_iwarp.mpa.pd_len", "Private data length")
f.mpa_ird = ProtoField.uint16("sanlab_iwarp.mpa.ird", "IRD (MPA v2)", base.DEC, nil, 0x3fff)
f.mpa_ord = ProtoField.uint16("sanlab_iwarp.mpa.ord", "ORD (MPA v2)", base.DEC, nil, 0x3fff)
f.mpa_pd = ProtoField.bytes("sanlab_iwarp.mpa.private_data", "Private data")
f.ulpdu_len = ProtoField.uint16("sanlab_iwarp.mpa.ulpdu_length", "ULPDU length")
f.pad = ProtoField.bytes("sanlab_iwarp.mpa.pad", "Pad")
f.crc = ProtoField.uint32("sanlab_iwarp.mpa.crc32c", "CRC32c", base.HEX)
f.tagged = ProtoField.bool("sanlab_iwarp.ddp.tagged", "Tagged", 8, nil, 0x80)
f.last = ProtoField.bool("sanlab_iwarp.ddp.last", "Last", 8, nil, 0x40)
f.ddp_ver = ProtoField.uint8("sanlab_iwarp.ddp.version", "DDP version", base.DEC, nil, 0x03)
f.rdmap_ver = ProtoField.uint8("sanlab_iwarp.rdmap.version", "RDMAP version", base.DEC, nil, 0xc0)
f.opcode = ProtoField.uint8("sanlab_iwarp.rdmap.opcode", "RDMAP opcode", base.DEC, rdmap_ops, 0x0f)
f.stag = ProtoField.uint32("sanlab_iwarp.ddp.stag", "STag", base.HEX)
f.to = ProtoField.uint64("sanlab_iwarp.ddp.to", "Tagged offset", base.HEX)
f.inv_stag = ProtoField.uint32("sanlab_iwarp.rdmap.inval_stag", "Invalidate STag", base.HEX)
f.qn = ProtoField.uint32("sanlab_iwarp.ddp.qn", "Queue number")
f.msn = ProtoField.uint32("sanlab_iwarp.ddp.msn", "Message sequence number")
f.mo = ProtoField.uint32("sanlab_iwarp.ddp.mo", "Message offset")
f.sink_stag = ProtoField.uint32("sanlab_iwarp.rdmap.sink_stag", "Data sink STag", base.HEX)
f.sink_to = ProtoField.uint64("sanlab_iwarp.rdmap.sink_to", "Data sink TO", base.HEX)
f.read_size = ProtoField.uint32("sanlab_iwarp.rdmap.read_size", "RDMA Read message size")
f.src_stag = ProtoField.uint32("sanlab_iwarp.rdmap.src_stag", "Data source STag", base.HEX)
f.src_to = ProtoField.uint64("sanlab_iwarp.rdmap.src_to", "Data source TO", base.HEX)
f.payload_len = ProtoField.uint32("sanlab_iwarp.payload_length", "Payload length")

local fi = iser.fields
fi.flags = ProtoField.uint8("sanlab_iser.flags", "iSER flags", base.HEX)
fi.wstag = ProtoField.uint32("sanlab_iser.write_stag", "Write STag", base.HEX)
fi.wva = ProtoField.uint64("sanlab_iser.write_va", "Write VA", base.HEX)
fi.rstag = ProtoField.uint32("sanlab_iser.read_stag", "Read STag", base.HEX)
fi.rva = ProtoField.uint64("sanlab_iser.read_va", "Read VA", base.HEX)
local iscsi_ops = {
  [0x00] = "NOP-Out", [0x01] = "SCSI Command", [0x02] = "Task Management Request", [0x03] = "Login Request",
  [0x04] = "Text Request", [0x05] = "SCSI Data-Out", [0x06] = "Logout Request", [0x20] = "NOP-In",
  [0x21] = "SCSI Response", [0x22] = "Task Management Response", [0x23] = "Login Response",
  [0x24] = "Text Response", [0x25] = "SCSI Data-In", [0x26] = "Logout Response", [0x31] = "R2T",
  [0x32] = "Async Message", [0x3f] = "Reject",
}
fi.opcode = ProtoField.uint8("sanlab_iser.iscsi.opcode", "iSCSI opcode", base.HEX, iscsi_ops, 0x3f)
fi.itt = ProtoField.uint32("sanlab_iser.iscsi.itt", "Initiator task tag", base.HEX)
fi.edtl = ProtoField.uint32("sanlab_iser.iscsi.edtl", "Expected data transfer length")
fi.status = ProtoField.uint8("sanlab_iser.iscsi.status", "SCSI status", base.HEX)
fi.scsi_op = ProtoField.uint8("sanlab_iser.scsi.opcode", "SCSI opcode", base.HEX)
fi.lba = ProtoField.uint64("sanlab_iser.scsi.lba", "Logical block address")
fi.xfer = ProtoField.uint32("sanlab_iser.scsi.transfer_length", "Transfer length (blocks)")

local fn = nvmeof.fields
local nvme_ops = { [0x00] = "Flush", [0x01] = "Write", [0x02] = "Read", [0x7f] = "Fabrics",
  [0x06] = "Identify", [0x09] = "Set Features", [0x0a] = "Get Features", [0x18] = "Keep Alive",
  [0x0c] = "Async Event Request" }
fn.opcode = ProtoField.uint8("sanlab_nvmeof.opcode", "Opcode", base.HEX, nvme_ops)
fn.cid = ProtoField.uint16("sanlab_nvmeof.cid", "Command identifier", base.HEX)
fn.nsid = ProtoField.uint32("sanlab_nvmeof.nsid", "Namespace")
fn.slba = ProtoField.uint64("sanlab_nvmeof.slba", "Starting LBA")
fn.nlb = ProtoField.uint16("sanlab_nvmeof.nlb", "Number of logical blocks (0-based)")
fn.sgl_len = ProtoField.uint32("sanlab_nvmeof.sgl_length", "SGL data length")
fn.sgl_type = ProtoField.uint8("sanlab_nvmeof.sgl_type", "SGL descriptor type", base.HEX)
fn.sgl_key = ProtoField.uint32("sanlab_nvmeof.sgl_key", "SGL key", base.HEX)
fn.sq_head = ProtoField.uint16("sanlab_nvmeof.sqhd", "SQ head")
fn.status = ProtoField.uint16("sanlab_nvmeof.status", "Status", base.HEX)
fn.kind = ProtoField.string("sanlab_nvmeof.kind", "Capsule")
-- Connection private data (NVMe/RDMA transport binding: the RDMA_CM REQ/REP/REJ layouts).
fn.cm_recfmt = ProtoField.uint16("sanlab_nvmeof.cm.recfmt", "Record format", base.DEC)
fn.cm_qid = ProtoField.uint16("sanlab_nvmeof.cm.qid", "Queue ID (0: admin)", base.DEC)
fn.cm_hrqsize = ProtoField.uint16("sanlab_nvmeof.cm.hrqsize", "Host receive queue size", base.DEC)
fn.cm_hsqsize = ProtoField.uint16("sanlab_nvmeof.cm.hsqsize", "Host send queue size (0-based)", base.DEC)
fn.cm_cntlid = ProtoField.uint16("sanlab_nvmeof.cm.cntlid", "Controller ID", base.HEX)
fn.cm_crqsize = ProtoField.uint16("sanlab_nvmeof.cm.crqsize", "Controller receive queue size", base.DEC)
fn.cm_sts = ProtoField.uint16("sanlab_nvmeof.cm.sts", "Reject status", base.HEX)
-- iSER's CM REQ header (RFC 7145 section 9.1 as Linux sends it): one flags byte.
fi.cm_flags = ProtoField.uint8("sanlab_iser.cm.flags", "iSER CM flags", base.HEX)
fi.cm_zbva = ProtoField.bool("sanlab_iser.cm.zbva_not_supported", "Zero-based VA not supported", 8, nil, 0x80)
fi.cm_sie = ProtoField.bool("sanlab_iser.cm.send_inv_not_supported", "Send with Invalidate not supported", 8, nil, 0x40)

local e_short = ProtoExpert.new("sanlab_iwarp.short", "Truncated iWARP frame",
  expert.group.MALFORMED, expert.severity.ERROR)
local e_ver = ProtoExpert.new("sanlab_iwarp.version", "Unexpected DDP/RDMAP version",
  expert.group.MALFORMED, expert.severity.WARN)
local e_len = ProtoExpert.new("sanlab_iwarp.length", "FPDU length exceeds the TCP segment",
  expert.group.MALFORMED, expert.severity.WARN)
iwarp.experts = { e_short, e_ver, e_len }

local KEY_REQ, KEY_REP = "MPA ID Req Frame", "MPA ID Rep Frame"
local ISER_PORT, NVME_PORT = 3260, 4420
local crc_on = {}  -- stream -> CRC negotiated
local streams = {}  -- stream -> "iwarp" or "other" (port 4420 only)
function iwarp.init() crc_on = {}; streams = {} end

local function stream_key(pinfo)
  local a, b = tostring(pinfo.src) .. ":" .. pinfo.src_port, tostring(pinfo.dst) .. ":" .. pinfo.dst_port
  if a < b then return a .. "-" .. b end
  return b .. "-" .. a
end

local function ulp_port(pinfo)
  if pinfo.src_port == NVME_PORT or pinfo.dst_port == NVME_PORT then return "nvme" end
  return "iser"
end

local function dissect_iser(tvb, pinfo, root)
  if tvb:len() < 28 then return "iSER (short)" end
  local t = root:add(iser, tvb())
  t:add(fi.flags, tvb(0, 1)); t:add(fi.wstag, tvb(4, 4)); t:add(fi.wva, tvb(8, 8))
  t:add(fi.rstag, tvb(16, 4)); t:add(fi.rva, tvb(20, 8))
  if tvb:len() < 28 + 48 then return "iSER control" end
  local bhs = tvb(28, 48):tvb()
  local op = bit.band(bhs(0, 1):uint(), 0x3f)
  t:add(fi.opcode, bhs(0, 1)); t:add(fi.itt, bhs(16, 4))
  local text = iscsi_ops[op] or string.format("iSCSI 0x%02x", op)
  if op == 0x01 then
    t:add(fi.edtl, bhs(20, 4))
    local cdb = bhs(32, 16)
    t:add(fi.scsi_op, cdb(0, 1))
    local rw = sanlab_scsi.read_write(cdb, t, fi.lba, fi.xfer)
    if rw then text = text .. " " .. rw end
  elseif op == 0x21 then
    t:add(fi.status, bhs(3, 1))
    text = string.format("%s status 0x%02x", text, bhs(3, 1):uint())
  end
  return text
end

local function dissect_nvme(tvb, pinfo, root)
  local t = root:add(nvmeof, tvb())
  if tvb:len() >= 64 then
    t:add(fn.kind, "command")
    local op = tvb(0, 1):uint()
    t:add(fn.opcode, tvb(0, 1)); t:add_le(fn.cid, tvb(2, 2)); t:add_le(fn.nsid, tvb(4, 4))
    -- Keyed SGL data block (type 4): 8-byte address, 24-bit length, 32-bit key.
    -- Other data block descriptors: 8-byte address/offset, 32-bit length.
    local sgl_type = bit.rshift(tvb(39, 1):uint(), 4)
    t:add(fn.sgl_type, tvb(39, 1), sgl_type)
    if sgl_type == 4 then
      t:add_le(fn.sgl_len, tvb(32, 3)); t:add_le(fn.sgl_key, tvb(35, 4))
    else
      t:add_le(fn.sgl_len, tvb(32, 4))
    end
    local text = string.format("NVMe %s cid 0x%04x", nvme_ops[op] or string.format("0x%02x", op), tvb(2, 2):le_uint())
    if op == 0x01 or op == 0x02 then
      t:add_le(fn.slba, tvb(40, 8)); t:add_le(fn.nlb, tvb(48, 2))
      text = text .. string.format(" LBA %s blocks %d", tostring(tvb(40, 8):le_uint64()), tvb(48, 2):le_uint() + 1)
    end
    return text
  elseif tvb:len() >= 16 then
    t:add(fn.kind, "completion")
    t:add_le(fn.sq_head, tvb(8, 2)); t:add_le(fn.cid, tvb(12, 2)); t:add_le(fn.status, tvb(14, 2))
    return string.format("NVMe completion cid 0x%04x status 0x%04x", tvb(12, 2):le_uint(),
      bit.rshift(tvb(14, 2):le_uint(), 1))
  end
  return "NVMe (short)"
end

-- NVMe/RDMA connection private data: which queue, and how deep.
local function cm_nvme(p, root, kind)
  local need = { req = 10, rep = 4, rej = 4 }
  if p:len() < need[kind] then return end
  local t = root:add(nvmeof, p())
  t:add_le(fn.cm_recfmt, p(0, 2))
  if kind == "req" then
    t:add_le(fn.cm_qid, p(2, 2)); t:add_le(fn.cm_hrqsize, p(4, 2)); t:add_le(fn.cm_hsqsize, p(6, 2))
    t:add_le(fn.cm_cntlid, p(8, 2))
  elseif kind == "rep" then
    t:add_le(fn.cm_crqsize, p(2, 2))
  else
    t:add_le(fn.cm_sts, p(2, 2))
  end
end

-- iSER CM REQ private data: the flags byte (the REP carries none in Linux).
local function cm_iser(p, root, kind)
  if kind ~= "req" or p:len() < 4 or bit.band(p(0, 1):uint(), 0x3f) ~= 0 then return false end
  local t = root:add(iser, p(0, 4))
  local flags = t:add(fi.cm_flags, p(0, 1))
  flags:add(fi.cm_zbva, p(0, 1)); flags:add(fi.cm_sie, p(0, 1))
  return true
end

-- One FPDU at the start of tvb; returns its length on the wire, or minus the bytes
-- still missing when the FPDU runs past the segment (the caller asks TCP for them).
local function dissect_fpdu(tvb, pinfo, root, crc)
  local len = tvb:len()
  if len < 2 then return -1 end
  local ulpdu = tvb(0, 2):uint()
  local pad = (4 - ((2 + ulpdu) % 4)) % 4
  -- The 4-byte CRC field is always there (RFC 5044 4.1: zero when CRCs were not agreed);
  -- counting it only when agreed read each FPDU's zero CRC as a truncated FPDU of its own.
  local total = 2 + ulpdu + pad + 4
  if total > len then return -(total - len) end
  local t = root:add(iwarp, tvb(0, total))
  t:add(f.ulpdu_len, tvb(0, 2))
  if ulpdu < 2 then t:add_proto_expert_info(e_short) return total end
  local b0, b1 = tvb(2, 1):uint(), tvb(3, 1):uint()
  t:add(f.tagged, tvb(2, 1)); t:add(f.last, tvb(2, 1)); t:add(f.ddp_ver, tvb(2, 1))
  t:add(f.rdmap_ver, tvb(3, 1)); t:add(f.opcode, tvb(3, 1))
  if bit.band(b0, 0x03) ~= 1 or bit.rshift(b1, 6) ~= 1 then t:add_proto_expert_info(e_ver) end
  local op = bit.band(b1, 0x0f)
  local hdr = bit.band(b0, 0x80) ~= 0 and 14 or 18
  if ulpdu < hdr then t:add_proto_expert_info(e_short) return total end
  local info = rdmap_ops[op] or ("opcode " .. op)
  if hdr == 14 then
    t:add(f.stag, tvb(4, 4)); t:add(f.to, tvb(8, 8))
  else
    t:add(f.inv_stag, tvb(4, 4)); t:add(f.qn, tvb(8, 4)); t:add(f.msn, tvb(12, 4)); t:add(f.mo, tvb(16, 4))
  end
  local plen = ulpdu - hdr
  t:add(f.payload_len, tvb(0, 2), plen)
  if pad > 0 then t:add(f.pad, tvb(2 + ulpdu, pad)) end
  if crc then t:add(f.crc, tvb(2 + ulpdu + pad, 4)) end
  if op == 1 and plen >= 28 then
    local p = tvb(2 + hdr, 28)
    t:add(f.sink_stag, p(0, 4)); t:add(f.sink_to, p(4, 8)); t:add(f.read_size, p(12, 4))
    t:add(f.src_stag, p(16, 4)); t:add(f.src_to, p(20, 8))
    info = info .. string.format(" %d bytes", p(12, 4):uint())
  elseif op >= 3 and op <= 6 and plen > 0 and tvb(16, 4):uint() == 0 then
    local payload = tvb(2 + hdr, plen):tvb()
    if ulp_port(pinfo) == "nvme" then info = info .. ": " .. dissect_nvme(payload, pinfo, root)
    else info = info .. ": " .. dissect_iser(payload, pinfo, root) end
  elseif op == 0 or op == 2 then
    info = info .. string.format(" %d bytes", plen)
  end
  return total, info
end

local function dissect_mpa_frame(tvb, pinfo, root, key)
  local t = root:add(iwarp, tvb())
  t:add(f.mpa_key, tvb(0, 16))
  if tvb:len() < 20 then t:add_proto_expert_info(e_short) return tvb:len() end
  local flags = t:add(f.mpa_flags, tvb(16, 1))
  flags:add(f.mpa_marker, tvb(16, 1)); flags:add(f.mpa_crc_flag, tvb(16, 1)); flags:add(f.mpa_reject, tvb(16, 1))
  t:add(f.mpa_rev, tvb(17, 1)); t:add(f.mpa_pd_len, tvb(18, 2))
  local rev, pd = tvb(17, 1):uint(), tvb(18, 2):uint()
  if tvb:len() < 20 + pd then t:add_proto_expert_info(e_short) return tvb:len() end
  if rev == 2 and pd >= 4 then
    t:add(f.mpa_ird, tvb(20, 2)); t:add(f.mpa_ord, tvb(22, 2))
  end
  if pd > 0 then t:add(f.mpa_pd, tvb(20, pd)) end
  local consumer = (rev == 2 and pd >= 4) and 24 or 20
  local rest = 20 + pd - consumer
  if rest > 0 then
    local reject = bit.band(tvb(16, 1):uint(), 0x20) ~= 0
    local kind = reject and "rej" or (key == KEY_REQ and "req" or "rep")
    local p = tvb(consumer, rest):tvb()
    if ulp_port(pinfo) == "nvme" then cm_nvme(p, root, kind) else cm_iser(p, root, kind) end
  end
  crc_on[stream_key(pinfo)] = bit.band(tvb(16, 1):uint(), 0x40) ~= 0
  pinfo.cols.protocol = "iWARP"
  pinfo.cols.info = string.format("MPA %s (rev %d)%s", key == KEY_REQ and "Request" or "Reply", rev,
    bit.band(tvb(16, 1):uint(), 0x20) ~= 0 and " REJECT" or "")
  return 20 + pd
end

local function dissect_stream(tvb, pinfo, root)
  local key = tvb:len() >= 16 and tvb(0, 16):string() or ""
  if key == KEY_REQ or key == KEY_REP then return dissect_mpa_frame(tvb, pinfo, root, key) end
  local crc = crc_on[stream_key(pinfo)]
  if crc == nil then crc = true end
  local offset, infos = 0, {}
  while offset < tvb:len() do
    local used, info = dissect_fpdu(tvb(offset):tvb(), pinfo, root, crc)
    if used < 0 then
      pinfo.desegment_offset = offset
      pinfo.desegment_len = -used
      break
    end
    if info then infos[#infos + 1] = info end
    offset = offset + used
  end
  pinfo.cols.protocol = "iWARP"
  if #infos > 0 then pinfo.cols.info = table.concat(infos, "; ") end
  return tvb:len()
end

function iwarp.dissector(tvb, pinfo, root) return dissect_stream(tvb, pinfo, root) end

local function heuristic(tvb, pinfo, root)
  if tvb:len() < 20 then return false end
  local key = tvb(0, 16):string()
  if key ~= KEY_REQ and key ~= KEY_REP then return false end
  pinfo.conversation = iwarp  -- the rest of this TCP stream is iWARP
  dissect_stream(tvb, pinfo, root)
  return true
end
iwarp:register_heuristic("tcp", heuristic)

local tcp_port = DissectorTable.get("tcp.port")
local nvme_tcp = tcp_port:get_dissector(NVME_PORT)
local tls = Dissector.get("tls")
local function registered(name)  -- Dissector.get answers nil, not an error, for an unknown name
  for _, known in ipairs(Dissector.list()) do if known == name then return true end end
  return false
end
if registered("nvme-tls") then tls = nil end  -- this Wireshark reads NVMe/TCP inside TLS itself
-- NVMe/TCP inside TLS (its secure channel, TP 8011): Wireshark 4.0's NVMe/TCP dissector
-- reads a TLS record as a PDU of unknown type 22.  A stream that begins with a TLS record
-- goes to the TLS dissector, which (with tls.keylog_file) decrypts it and hands the
-- application data to NVMe/TCP through the tls.port table.
local function starts_tls(tvb)
  if tvb:len() < 3 then return false end
  local kind, major, minor = tvb(0, 1):uint(), tvb(1, 1):uint(), tvb(2, 1):uint()
  return kind >= 20 and kind <= 23 and major == 3 and minor >= 1 and minor <= 4
end
local on_4420 = Proto("sanlab_iwarp_4420", "iWARP or NVMe/TCP on port 4420")
function on_4420.dissector(tvb, pinfo, root)
  local key = stream_key(pinfo)
  if streams[key] == nil then
    local head = tvb:len() >= 16 and tvb(0, 16):string() or ""
    streams[key] = (head == KEY_REQ or head == KEY_REP) and "iwarp" or (starts_tls(tvb) and "tls") or "other"
  end
  if streams[key] == "iwarp" then return dissect_stream(tvb, pinfo, root) end
  pinfo.can_desegment = pinfo.can_desegment + 1
  if streams[key] == "tls" and tls then return tls:call(tvb, pinfo, root) end
  if not nvme_tcp then return 0 end
  return nvme_tcp:call(tvb, pinfo, root)
end
if nvme_tcp and tls then pcall(function() DissectorTable.get("tls.port"):add(NVME_PORT, nvme_tcp) end) end
if nvme_tcp then tcp_port:add(NVME_PORT, on_4420) end

-- iSER and NVMe/RDMA over InfiniBand/RoCE: a CM REQ to port 3260 or 4420 carries the
-- same private data as the MPA request.  The port comes from the RDMA/CM (IP CM)
-- service ID, so Wireshark has parsed that header and hands over the consumer part.
-- Wireshark 4.0 decodes neither (its nvme-rdma only the REP).
local cm_dport = Field.new("infiniband.cm.req.serviceid.dport")
local function cm_private(tvb, pinfo, root)
  local dport = cm_dport()
  if not dport or tvb:len() < 4 then return false end
  if dport.value == ISER_PORT then return cm_iser(tvb, root, "req") end
  if dport.value == NVME_PORT and tvb:len() >= 10 and tvb(0, 2):le_uint() == 0 then
    cm_nvme(tvb, root, "req")
    return true
  end
  return false
end
pcall(function() nvmeof:register_heuristic("infiniband.mad.cm.private", cm_private) end)
