-- SRP, the SCSI RDMA Protocol (T10 SRP / SRP-2), for Wireshark 4.0 and later.
--
-- Tested with: Wireshark/tshark 4.0.17 (Debian 12).  No Wireshark release decodes
-- SRP over RDMA, so there is nothing to step aside for.
--
-- Wireshark has no dissector for it: its "srp" is H.324's Simple
-- Retransmission Protocol.  SRP information units travel in RDMA SENDs over
-- InfiniBand or RoCE; this dissector finds them heuristically in
-- "infiniband.payload" (and the RDMA/CM login in the CM private data) and
-- decodes LOGIN_REQ/RSP/REJ, SRP_CMD with its CDB and memory descriptors,
-- SRP_RSP with status and sense, I_LOGOUT, T_LOGOUT, TSK_MGMT, CRED_REQ/RSP
-- and AER_REQ/RSP.  Short or inconsistent IUs get expert info, never a Lua
-- error.  Layouts follow Linux's include/scsi/srp.h.
--
-- Filter prefix: srp_rdma.  sanlab: `sanlab dissectors install`.

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

local srp = Proto("srp_rdma", "SCSI RDMA Protocol (SRP)")

local OP = {
  LOGIN_REQ = 0x00, TSK_MGMT = 0x01, CMD = 0x02, I_LOGOUT = 0x03,
  LOGIN_RSP = 0xc0, RSP = 0xc1, LOGIN_REJ = 0xc2,
  T_LOGOUT = 0x80, CRED_REQ = 0x81, AER_REQ = 0x82, CRED_RSP = 0x41, AER_RSP = 0x42,
}
local op_names = {
  [0x00] = "SRP_LOGIN_REQ", [0x01] = "SRP_TSK_MGMT", [0x02] = "SRP_CMD", [0x03] = "SRP_I_LOGOUT",
  [0xc0] = "SRP_LOGIN_RSP", [0xc1] = "SRP_RSP", [0xc2] = "SRP_LOGIN_REJ", [0x80] = "SRP_T_LOGOUT",
  [0x81] = "SRP_CRED_REQ", [0x82] = "SRP_AER_REQ", [0x41] = "SRP_CRED_RSP", [0x42] = "SRP_AER_RSP",
}
-- Smallest legal size of each IU.
local min_len = {
  [0x00] = 64, [0x01] = 48, [0x02] = 48, [0x03] = 16, [0xc0] = 52, [0xc1] = 36, [0xc2] = 32,
  [0x80] = 16, [0x81] = 16, [0x82] = 36, [0x41] = 16, [0x42] = 16,
}
local buf_fmt_names = { [0] = "none", [1] = "direct", [2] = "indirect", [3] = "immediate" }
local scsi_status = {
  [0x00] = "GOOD", [0x02] = "CHECK CONDITION", [0x08] = "BUSY", [0x18] = "RESERVATION CONFLICT",
  [0x28] = "TASK SET FULL", [0x30] = "ACA ACTIVE", [0x40] = "TASK ABORTED",
}
local cdb_names = {
  [0x00] = "TEST UNIT READY", [0x03] = "REQUEST SENSE", [0x12] = "INQUIRY", [0x1a] = "MODE SENSE(6)",
  [0x25] = "READ CAPACITY(10)", [0x28] = "READ(10)", [0x2a] = "WRITE(10)", [0x35] = "SYNCHRONIZE CACHE(10)",
  [0x5a] = "MODE SENSE(10)", [0x88] = "READ(16)", [0x8a] = "WRITE(16)", [0x9e] = "SERVICE ACTION IN(16)",
  [0xa0] = "REPORT LUNS", [0xa3] = "MAINTENANCE IN", [0x42] = "UNMAP", [0x93] = "WRITE SAME(16)",
}
local tmf_names = {
  [0x01] = "ABORT TASK", [0x02] = "ABORT TASK SET", [0x04] = "CLEAR TASK SET",
  [0x08] = "LOGICAL UNIT RESET", [0x40] = "CLEAR ACA",
}
local login_rej_reasons = {
  [0x00010000] = "Unable to establish RDMA channel, no reason specified",
  [0x00010001] = "Insufficient resources",
  [0x00010002] = "Requested maximum initiator to target IU length too large",
  [0x00010003] = "Unable to associate RDMA channel with I_T nexus",
  [0x00010004] = "Unsupported data buffer descriptor format",
  [0x00010005] = "Multiple RDMA channels not supported",
  [0x00010006] = "Channel limit reached (or login refused by the target's ACL)",
}

local f = srp.fields
f.opcode = ProtoField.uint8("srp_rdma.opcode", "Opcode", base.HEX, op_names)
f.tag = ProtoField.bytes("srp_rdma.tag", "Tag")
f.sol_not = ProtoField.uint8("srp_rdma.sol_not", "Solicited notification", base.HEX)
f.req_lim_delta = ProtoField.int32("srp_rdma.req_lim_delta", "Request limit delta")
f.buf_fmt = ProtoField.uint8("srp_rdma.buf_fmt", "Buffer format", base.HEX)
f.dout_fmt = ProtoField.uint8("srp_rdma.data_out_fmt", "Data-out descriptor format", base.DEC, buf_fmt_names)
f.din_fmt = ProtoField.uint8("srp_rdma.data_in_fmt", "Data-in descriptor format", base.DEC, buf_fmt_names)
f.dout_cnt = ProtoField.uint8("srp_rdma.data_out_desc_cnt", "Data-out descriptor count")
f.din_cnt = ProtoField.uint8("srp_rdma.data_in_desc_cnt", "Data-in descriptor count")
f.lun = ProtoField.uint16("srp_rdma.lun", "LUN")
f.task_attr = ProtoField.uint8("srp_rdma.task_attr", "Task attribute", base.HEX)
f.add_cdb_len = ProtoField.uint8("srp_rdma.add_cdb_len", "Additional CDB length")
f.cdb = ProtoField.bytes("srp_rdma.cdb", "CDB")
f.cdb_opcode = ProtoField.uint8("srp_rdma.cdb.opcode", "SCSI opcode", base.HEX, cdb_names)
f.lba = ProtoField.uint64("srp_rdma.cdb.lba", "Logical block address")
f.xfer_len = ProtoField.uint32("srp_rdma.cdb.transfer_length", "Transfer length (blocks)")
f.desc = ProtoField.bytes("srp_rdma.desc", "Memory descriptor")
f.desc_va = ProtoField.uint64("srp_rdma.desc.va", "Virtual address", base.HEX)
f.desc_key = ProtoField.uint32("srp_rdma.desc.key", "Remote key", base.HEX)
f.desc_len = ProtoField.uint32("srp_rdma.desc.len", "Length")
f.ind_total = ProtoField.uint32("srp_rdma.desc.indirect_total", "Indirect total length")
f.flags = ProtoField.uint8("srp_rdma.rsp_flags", "Response flags", base.HEX)
f.status = ProtoField.uint8("srp_rdma.status", "SCSI status", base.HEX, scsi_status)
f.dout_res = ProtoField.uint32("srp_rdma.data_out_residual", "Data-out residual count")
f.din_res = ProtoField.uint32("srp_rdma.data_in_residual", "Data-in residual count")
f.sense_len = ProtoField.uint32("srp_rdma.sense_len", "Sense data length")
f.resp_len = ProtoField.uint32("srp_rdma.resp_len", "Response data length")
f.sense = ProtoField.bytes("srp_rdma.sense", "Sense data")
f.sense_key = ProtoField.uint8("srp_rdma.sense.key", "Sense key", base.HEX)
f.asc = ProtoField.uint16("srp_rdma.sense.asc_ascq", "ASC/ASCQ", base.HEX)
f.it_iu_len = ProtoField.uint32("srp_rdma.req_it_iu_len", "Requested max initiator-to-target IU length")
f.max_it = ProtoField.uint32("srp_rdma.max_it_iu_len", "Max initiator-to-target IU length")
f.max_ti = ProtoField.uint32("srp_rdma.max_ti_iu_len", "Max target-to-initiator IU length")
f.req_flags = ProtoField.uint8("srp_rdma.req_flags", "Login flags", base.HEX)
f.imm_off = ProtoField.uint16("srp_rdma.imm_data_offset", "Immediate data offset")
f.ini_port = ProtoField.bytes("srp_rdma.initiator_port_id", "Initiator port identifier")
f.tgt_port = ProtoField.bytes("srp_rdma.target_port_id", "Target port identifier")
f.reason = ProtoField.uint32("srp_rdma.reason", "Reason", base.HEX, login_rej_reasons)
f.tmf = ProtoField.uint8("srp_rdma.tsk_mgmt_func", "Task management function", base.HEX, tmf_names)
f.task_tag = ProtoField.bytes("srp_rdma.task_tag", "Task tag")
f.rdma_cm = ProtoField.bool("srp_rdma.rdma_cm_login", "Login carried in RDMA/CM private data")

local e_short = ProtoExpert.new("srp_rdma.short", "SRP IU shorter than its fixed part",
  expert.group.MALFORMED, expert.severity.ERROR)
local e_desc = ProtoExpert.new("srp_rdma.desc_truncated", "Memory descriptors run past the IU",
  expert.group.MALFORMED, expert.severity.WARN)
local e_sense = ProtoExpert.new("srp_rdma.sense_truncated", "Sense data runs past the IU",
  expert.group.MALFORMED, expert.severity.WARN)
local e_check = ProtoExpert.new("srp_rdma.check_condition", "CHECK CONDITION",
  expert.group.RESPONSE_CODE, expert.severity.WARN)
srp.experts = { e_short, e_desc, e_sense, e_check }

local function all_zero(tvb, offset, len)
  for i = offset, offset + len - 1 do
    if tvb(i, 1):uint() ~= 0 then return false end
  end
  return true
end

local function lun_of(tvb, offset)
  -- SAM single-level LUN: the low 14 bits of the first two bytes.
  return bit.band(tvb(offset, 2):uint(), 0x3fff)
end

local function dissect_cdb(tvb, offset, tree, pinfo)
  local cdb = tvb(offset, 16)
  local item = tree:add(f.cdb, cdb)
  local op = cdb(0, 1):uint()
  item:add(f.cdb_opcode, cdb(0, 1))
  return sanlab_scsi.read_write(cdb, item, f.lba, f.xfer_len) or cdb_names[op] or string.format("0x%02x", op)
end

local function dissect_descriptors(tvb, offset, tree, fmt, count, pinfo)
  -- fmt 1: count direct descriptors; fmt 2: one indirect table descriptor + total + list;
  -- fmt 3 (SRP-2 immediate data): a 4-byte length, the data itself later in the IU.
  local len = tvb:len()
  if fmt == 3 then
    if offset + 4 > len then tree:add_proto_expert_info(e_desc) return end
    tree:add(f.desc, tvb(offset, 4)):append_text(" (immediate data)"):add(f.desc_len, tvb(offset, 4))
    return
  end
  if fmt == 2 then
    if offset + 20 > len then tree:add_proto_expert_info(e_desc) return end
    local t = tree:add(f.desc, tvb(offset, 16)):append_text(" (indirect table)")
    t:add(f.desc_va, tvb(offset, 8)); t:add(f.desc_key, tvb(offset + 8, 4)); t:add(f.desc_len, tvb(offset + 12, 4))
    tree:add(f.ind_total, tvb(offset + 16, 4))
    offset = offset + 20
  end
  for _ = 1, count do
    if offset + 16 > len then tree:add_proto_expert_info(e_desc) return end
    local d = tree:add(f.desc, tvb(offset, 16))
    d:add(f.desc_va, tvb(offset, 8)); d:add(f.desc_key, tvb(offset + 8, 4)); d:add(f.desc_len, tvb(offset + 12, 4))
    d:append_text(string.format(" (%d bytes)", tvb(offset + 12, 4):uint()))
    offset = offset + 16
  end
end

local dissect_iu = {}

dissect_iu[OP.CMD] = function(tvb, tree, pinfo)
  tree:add(f.sol_not, tvb(1, 1))
  local fmt = tvb(5, 1):uint()
  local bf = tree:add(f.buf_fmt, tvb(5, 1))
  bf:add(f.dout_fmt, tvb(5, 1), bit.rshift(fmt, 4)); bf:add(f.din_fmt, tvb(5, 1), bit.band(fmt, 0xf))
  tree:add(f.dout_cnt, tvb(6, 1)); tree:add(f.din_cnt, tvb(7, 1))
  tree:add(f.tag, tvb(8, 8))
  tree:add(f.lun, tvb(20, 2), lun_of(tvb, 20))
  tree:add(f.task_attr, tvb(29, 1)); tree:add(f.add_cdb_len, tvb(31, 1))
  local summary = dissect_cdb(tvb, 32, tree, pinfo)
  local offset = 48 + bit.band(tvb(31, 1):uint(), 0xfc)
  -- A direct format means exactly one descriptor (Linux leaves the count 0).
  local dout, din = bit.rshift(fmt, 4), bit.band(fmt, 0xf)
  local n_out = dout == 1 and 1 or tvb(6, 1):uint()
  local n_in = din == 1 and 1 or tvb(7, 1):uint()
  if dout ~= 0 then dissect_descriptors(tvb, offset, tree, dout, n_out, pinfo)
    offset = offset + (dout == 3 and 4 or ((dout == 2 and 20 or 0) + 16 * n_out)) end
  if din ~= 0 then dissect_descriptors(tvb, offset, tree, din, n_in, pinfo) end
  return summary
end

dissect_iu[OP.RSP] = function(tvb, tree, pinfo)
  tree:add(f.sol_not, tvb(1, 1)); tree:add(f.req_lim_delta, tvb(4, 4)); tree:add(f.tag, tvb(8, 8))
  tree:add(f.flags, tvb(18, 1))
  local status = tvb(19, 1):uint()
  local st = tree:add(f.status, tvb(19, 1))
  tree:add(f.dout_res, tvb(20, 4)); tree:add(f.din_res, tvb(24, 4))
  tree:add(f.sense_len, tvb(28, 4)); tree:add(f.resp_len, tvb(32, 4))
  local resp_len, sense_len = tvb(32, 4):uint(), tvb(28, 4):uint()
  local flags = tvb(18, 1):uint()
  local offset = 36 + ((bit.band(flags, 1) ~= 0) and resp_len or 0)
  if bit.band(flags, 2) ~= 0 and sense_len > 0 then
    if offset + sense_len > tvb:len() then tree:add_proto_expert_info(e_sense)
    else
      local s = tree:add(f.sense, tvb(offset, sense_len))
      if sense_len >= 14 then
        s:add(f.sense_key, tvb(offset + 2, 1), bit.band(tvb(offset + 2, 1):uint(), 0x0f))
        s:add(f.asc, tvb(offset + 12, 2))
      end
    end
  end
  if status == 0x02 then st:add_proto_expert_info(e_check) end
  return "status " .. (scsi_status[status] or string.format("0x%02x", status))
end

dissect_iu[OP.LOGIN_REQ] = function(tvb, tree, pinfo)
  tree:add(f.tag, tvb(8, 8)); tree:add(f.it_iu_len, tvb(16, 4)); tree:add(f.buf_fmt, tvb(24, 2))
  tree:add(f.req_flags, tvb(26, 1)); tree:add(f.imm_off, tvb(28, 2))
  tree:add(f.ini_port, tvb(32, 16)); tree:add(f.tgt_port, tvb(48, 16))
  return "max IU " .. tvb(16, 4):uint()
end

dissect_iu[OP.LOGIN_RSP] = function(tvb, tree, pinfo)
  tree:add(f.req_lim_delta, tvb(4, 4)); tree:add(f.tag, tvb(8, 8))
  tree:add(f.max_it, tvb(16, 4)); tree:add(f.max_ti, tvb(20, 4)); tree:add(f.buf_fmt, tvb(24, 2))
  tree:add(f.req_flags, tvb(26, 1))
  return "credits " .. tvb(4, 4):int()
end

dissect_iu[OP.LOGIN_REJ] = function(tvb, tree, pinfo)
  tree:add(f.reason, tvb(4, 4)); tree:add(f.tag, tvb(8, 8)); tree:add(f.buf_fmt, tvb(24, 2))
  return string.format("reason 0x%08x", tvb(4, 4):uint())
end

dissect_iu[OP.I_LOGOUT] = function(tvb, tree) tree:add(f.tag, tvb(8, 8)) return "" end
dissect_iu[OP.T_LOGOUT] = function(tvb, tree)
  tree:add(f.sol_not, tvb(1, 1)); tree:add(f.reason, tvb(4, 4)); tree:add(f.tag, tvb(8, 8))
  return string.format("reason 0x%08x", tvb(4, 4):uint())
end
dissect_iu[OP.TSK_MGMT] = function(tvb, tree)
  tree:add(f.sol_not, tvb(1, 1)); tree:add(f.tag, tvb(8, 8)); tree:add(f.lun, tvb(20, 2), lun_of(tvb, 20))
  tree:add(f.tmf, tvb(30, 1)); tree:add(f.task_tag, tvb(32, 8))
  return tmf_names[tvb(30, 1):uint()] or ""
end
local function credit(tvb, tree)
  tree:add(f.sol_not, tvb(1, 1)); tree:add(f.req_lim_delta, tvb(4, 4)); tree:add(f.tag, tvb(8, 8))
  return "delta " .. tvb(4, 4):int()
end
dissect_iu[OP.CRED_REQ] = credit
dissect_iu[OP.AER_REQ] = function(tvb, tree)
  local s = credit(tvb, tree)
  tree:add(f.lun, tvb(20, 2), lun_of(tvb, 20)); tree:add(f.sense_len, tvb(28, 4))
  return s
end
dissect_iu[OP.CRED_RSP] = function(tvb, tree) tree:add(f.tag, tvb(8, 8)) return "" end
dissect_iu[OP.AER_RSP] = dissect_iu[OP.CRED_RSP]

local function dissect(tvb, pinfo, root)
  local op = tvb(0, 1):uint()
  pinfo.cols.protocol = "SRP"
  local tree = root:add(srp, tvb())
  tree:add(f.opcode, tvb(0, 1))
  local name = op_names[op]
  if tvb:len() < min_len[op] then
    tree:add_proto_expert_info(e_short,
      string.format("%s needs %d bytes, has %d", name, min_len[op], tvb:len()))
    pinfo.cols.info = name .. " [truncated]"
    return tvb:len()
  end
  local summary = dissect_iu[op](tvb, tree, pinfo)
  tree:append_text(", " .. name)
  pinfo.cols.info = name .. ((summary ~= "") and (" " .. summary) or "")
  return tvb:len(), tree
end

-- Heuristic: an SRP opcode, the IU long enough to be one (or truncated),
-- and the reserved bytes that SRP requires to be zero actually zero.
local reserved = {
  [0x00] = { { 1, 7 } }, [0x02] = { { 2, 3 }, { 16, 4 } }, [0xc1] = { { 2, 2 }, { 16, 2 } },
  [0xc0] = { { 1, 3 } }, [0xc2] = { { 1, 3 }, { 16, 8 } }, [0x03] = { { 1, 7 } },
  [0x80] = { { 2, 2 } }, [0x81] = { { 2, 2 } }, [0x82] = { { 2, 2 }, { 16, 4 } },
  [0x41] = { { 1, 7 } }, [0x42] = { { 1, 7 } }, [0x01] = { { 2, 6 }, { 16, 4 } },
}

local function looks_like_srp(tvb)
  if tvb:len() < 16 then return false end
  local op = tvb(0, 1):uint()
  if not op_names[op] then return false end
  for _, r in ipairs(reserved[op]) do
    if r[1] + r[2] <= tvb:len() and not all_zero(tvb, r[1], r[2]) then return false end
  end
  if op == OP.CMD then
    local fmt = tvb(5, 1):uint()
    if bit.rshift(fmt, 4) > 3 or bit.band(fmt, 0xf) > 2 then return false end
  end
  return true
end

-- Only the start of a SEND carries an IU: SEND First, SEND Only (with
-- Immediate or Invalidate).  RDMA WRITE and READ payload is data, and SEND
-- Middle/Last continue an IU, so none of them is ever decoded as SRP.
local bth_opcode = Field.new("infiniband.bth.opcode")
local IU_STARTS = { [0] = true, [4] = true, [5] = true, [23] = true }
-- Logins travel in CM private data, never in a SEND.
local LOGIN_OPS = { [OP.LOGIN_REQ] = true, [OP.LOGIN_RSP] = true, [OP.LOGIN_REJ] = true }

local function heuristic(tvb, pinfo, tree)
  local opcode = bth_opcode()
  if not opcode or not IU_STARTS[opcode.value] then return false end
  if tvb:len() < 1 or LOGIN_OPS[tvb(0, 1):uint()] then return false end
  if not looks_like_srp(tvb) then return false end
  dissect(tvb, pinfo, tree)
  return true
end
srp:register_heuristic("infiniband.payload", heuristic)

-- The RDMA/CM login.  A CM REQ carries srp_login_req_rdma (tag, buf_fmt,
-- flags, opcode 0 at byte 11, IU length, port identifiers).  Wireshark
-- hands over either the whole private data (a 36-byte RDMA/CM header, then
-- the login) or, when it has parsed the IP CM header itself, the consumer
-- part alone; both are tried.  The REP and REJ carry SRP_LOGIN_RSP and
-- SRP_LOGIN_REJ in their ordinary layout (opcode at byte 0).
local function login_req(p, pinfo, root)
  pinfo.cols.protocol = "SRP"
  local tree = root:add(srp, p())
  tree:add(f.rdma_cm, p(0, 0), true)
  tree:add(f.opcode, p(11, 1)); tree:add(f.tag, p(0, 8)); tree:add(f.buf_fmt, p(8, 2))
  tree:add(f.req_flags, p(10, 1)); tree:add(f.it_iu_len, p(12, 4))
  tree:add(f.ini_port, p(16, 16)); tree:add(f.tgt_port, p(32, 16))
  pinfo.cols.info = "SRP_LOGIN_REQ (RDMA/CM) max IU " .. p(12, 4):uint()
  return true
end

local function is_login_req(p)
  if p:len() < 48 or p(11, 1):uint() ~= OP.LOGIN_REQ then return false end
  local iu = p(12, 4):uint()
  return iu >= 64 and iu <= 1048576 and p(8, 1):uint() == 0 and bit.band(p(9, 1):uint(), 0xf9) == 0
end

local function cm_private(tvb, pinfo, root)
  for _, offset in ipairs({ 0, 36 }) do
    if tvb:len() > offset then
      local p = tvb(offset):tvb()
      if is_login_req(p) then return login_req(p, pinfo, root) end
      local op = p:len() >= 32 and p(0, 1):uint() or nil
      if (op == OP.LOGIN_RSP or op == OP.LOGIN_REJ) and looks_like_srp(p) then
        local _, tree = dissect(p, pinfo, root)
        if tree then tree:add(f.rdma_cm, p(0, 0), true) end
        pinfo.cols.info = tostring(pinfo.cols.info) .. " (RDMA/CM)"
        return true
      end
    end
  end
  return false
end
pcall(function() srp:register_heuristic("infiniband.mad.cm.private", cm_private) end)
