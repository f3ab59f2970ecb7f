-- sanlab: the SCSI READ/WRITE (10) and (16) CDB fields, decoded once for
-- srp.lua and iwarp.lua (both carry SCSI commands: SRP_CMD and iSER).
--
-- Wireshark gives each plugin its own globals, so the others load this file
-- themselves (dofile, from their own folder) and use the table it returns;
-- loaded as a plugin on its own it does nothing.  `sanlab dissectors
-- install` copies all three.

local sanlab_scsi = {}

local RW = {
  [0x28] = { name = "READ(10)", lba = { 2, 4 }, len = { 7, 2 } },
  [0x2a] = { name = "WRITE(10)", lba = { 2, 4 }, len = { 7, 2 } },
  [0x88] = { name = "READ(16)", lba = { 2, 8 }, len = { 10, 4 } },
  [0x8a] = { name = "WRITE(16)", lba = { 2, 8 }, len = { 10, 4 } },
}

-- Adds the LBA and transfer length of a READ/WRITE CDB (a 16-byte TvbRange)
-- to tree, with the caller's own fields; returns "READ(10) LBA n len m", or
-- nil for any other command.
function sanlab_scsi.read_write(cdb, tree, lba_field, len_field)
  local rw = RW[cdb(0, 1):uint()]
  if not rw then return nil end
  local lba = cdb(rw.lba[1], rw.lba[2])
  local len = cdb(rw.len[1], rw.len[2])
  tree:add(lba_field, lba, lba:uint64())
  tree:add(len_field, len)
  return string.format("%s LBA %s len %d", rw.name, tostring(lba:uint64()), len:uint())
end

return sanlab_scsi
