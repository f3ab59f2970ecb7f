"""Bytes per I/O against cases worked out by hand from wire-formats.md."""

from __future__ import annotations

import pytest

from sanlab.models.core.transports import (
    ProtocolParams,
    Recipe,
    recipe,
    send_units,
    stack_params,
    wire_bound_iops,
    wire_cost,
)
from sanlab.models.core.wire import Message, data_rate_gbps, rdma_path_mtu, tcp_mss

ETH = 14 + 4 + 20  # header + FCS + preamble/gap
TCP = 20 + 32  # IPv4 + TCP with timestamps
ROCE = ETH + 20 + 8 + 12 + 4  # + IPv4 + UDP + BTH + ICRC
IB = 8 + 12 + 4 + 2  # LRH + BTH + ICRC + VCRC


def test_mss_and_path_mtu():
    assert tcp_mss(1500) == 1448 and tcp_mss(9000) == 8948
    assert rdma_path_mtu(1500, "roce") == 1024
    assert rdma_path_mtu(4200, "roce") == 4096
    assert rdma_path_mtu(9000, "roce") == 4096
    assert rdma_path_mtu(4096, "ib") == 4096


OLD_LIO = ProtocolParams(target_mrdsl=8192, status_in_data=False)


def test_iscsi_read_4k_on_1500():
    # out: SCSI Command (48) + one pure ACK for the Data-In.
    # in:  LIO sends the Data-In header alone (48), then pushes the 4 KiB page:
    #      1448 + 1448 + 1200; SCSI Response 48.  The initiator takes the page in
    #      as one GRO batch (> 1 MSS unacknowledged: ACK at once); the short
    #      header and response alone draw no ACK (they are not two in a row
    #      without an ACK between), so the next command carries it.
    cost = wire_cost(recipe("iscsi", "randread", 4096, OLD_LIO), "eth", 1500)
    assert cost.wire_out == (48 + TCP + ETH) + (TCP + ETH)
    assert cost.wire_in == (48 + TCP + ETH) + 2 * (1448 + TCP + ETH) + (1200 + TCP + ETH) + (48 + TCP + ETH)
    assert cost.frames == 7 and cost.ack_frames == 1


def test_lio_pushes_each_page_and_tgt_corks_the_pdu():
    # 16 KiB read, status in the last Data-In: LIO = header + 4 pushed pages of
    # 3 segments, one ACK per page; tgt = one 16432-byte push, 12 segments, one ACK.
    lio = wire_cost(recipe("iscsi", "read", 16384, stack_params("lio")), "eth", 1500)
    tgt = wire_cost(recipe("iscsi", "read", 16384, stack_params("tgt")), "eth", 1500)
    assert (lio.frames_in, lio.ack_frames) == (1 + 4 * 3, 4)
    assert (tgt.frames_in, tgt.ack_frames) == (12, 1)
    assert lio.wire_in - tgt.wire_in == (13 - 12) * (TCP + ETH)


def test_initiator_sends_the_header_alone():
    # open-iscsi: the 48-byte header without MSG_MORE, then 4 KiB of immediate data.
    r = recipe("iscsi", "write", 4096)
    assert r.messages[0].push_sizes() == (48, 4096)
    cost = wire_cost(r, "eth", 1500)
    assert cost.frames_out == 1 + 3 and cost.ack_frames == 1


def test_nvmet_corks_the_read_response_behind_its_data():
    # C2HData 24 + 4096 and the 24-byte response leave in one push:
    # 4144 bytes = 1448 + 1448 + 1248, three segments, one ACK.
    cost = wire_cost(recipe("nvme-tcp", "read", 4096), "eth", 1500)
    assert cost.frames_in == 3 and cost.ack_frames == 1
    assert cost.wire_in == 2 * (1448 + TCP + ETH) + (1248 + TCP + ETH)
    no_flow = recipe("nvme-tcp", "read", 4096, ProtocolParams(nvme_tcp_sq_flow_disabled=True))
    assert [m.label for m in no_flow.messages] == ["capsule-cmd", "c2h-data"]


def test_a_corked_response_shares_its_datas_super_packet():
    # What each host's TCP stack handles with TSO and GRO: the 72-byte command,
    # then C2HData and the response corked behind it as one super-packet, and
    # one ACK. A 4 KiB write with in-capsule data costs as many.
    read = recipe("nvme-tcp", "read", 4096)
    assert send_units(read) == [72, 24 + 4096 + 24]
    assert wire_cost(read, "eth", 1500).super_packets == 2 + 1
    write = recipe("nvme-tcp", "write", 4096)
    assert send_units(write) == [72 + 4096, 24]
    assert wire_cost(write, "eth", 1500).super_packets == 2 + 1
    # With SQ flow control disabled the C2HData carries the status and ends the I/O alone.
    no_flow = recipe("nvme-tcp", "read", 4096, ProtocolParams(nvme_tcp_sq_flow_disabled=True))
    assert send_units(no_flow) == [72, 24 + 4096]


def test_corking_joins_only_what_one_side_sends():
    corked = Message("in", "stream", 100, "data", corked=True)
    answer = Message("out", "stream", 48, "reply")
    last = Message("in", "stream", 24, "status")
    assert send_units(Recipe("x", "read", 100, (corked, answer, last), 1)) == [100, 48, 24]
    assert send_units(Recipe("x", "read", 100, (corked, last, answer), 1)) == [124, 48]


def test_gro_batches_hold_at_most_64k():
    # A 1 MiB C2HData in one push: 725 segments, batches of 45 (64 KiB / 1448),
    # each more than one MSS: 17 ACKs, not one per two segments.
    cost = wire_cost(recipe("nvme-tcp", "read", 1 << 20), "eth", 1500)
    segments = -(-(24 + (1 << 20) + 24) // 1448)
    assert cost.frames_in == segments == 725
    assert cost.ack_frames == -(-segments // 45) == 17


def test_pushes_must_add_up():
    with pytest.raises(ValueError, match="do not add up"):
        Message("out", "stream", 100, "bad", pushes=(48, 48))


def test_iscsi_read_status_in_last_data_in():
    # LIO on 6.1 (captured): the status rides in the last Data-In, no SCSI Response PDU.
    r = recipe("iscsi", "randread", 4096)
    assert [m.label for m in r.messages] == ["scsi-cmd", "data-in"]


def test_iscsi_write_lio_61_defaults_fit_64k_immediate():
    # Captured LIO/open-iscsi login: MRDSL 262144, FirstBurstLength 65536, ImmediateData=Yes.
    assert [m.label for m in recipe("iscsi", "write", 65536).messages] == ["scsi-cmd", "scsi-rsp"]
    r = recipe("iscsi", "write", 131072)
    assert [m.label for m in r.messages] == ["scsi-cmd", "r2t", "data-out", "scsi-rsp"]
    assert r.round_trips == 2


def test_iscsi_write_64k_with_8k_mrdsl_needs_r2t():
    # A target announcing MaxRecvDataSegmentLength 8192: 8 KiB immediate, R2T, 7 Data-Out PDUs.
    r = recipe("iscsi", "randwrite", 65536, OLD_LIO)
    labels = [m.label for m in r.messages]
    assert labels == ["scsi-cmd", "r2t"] + ["data-out"] * 7 + ["scsi-rsp"]
    assert r.round_trips == 2
    assert r.messages[0].size == 48 + 8192


def test_iscsi_write_with_digests_and_no_initial_r2t():
    p = ProtocolParams(target_mrdsl=1 << 20, initial_r2t=False, header_digest=True, data_digest=True)
    r = recipe("iscsi", "write", 16384, p)
    assert [m.size for m in r.messages] == [48 + 4 + 16384 + 4, 48 + 4]
    assert r.round_trips == 1


def test_iser_read_4k_on_roce_1500():
    # SEND 28+48 out (+ACK in), RDMA WRITE 4 x 1024 in (RETH on the first, +ACK out),
    # SEND response in (+ACK out).
    cost = wire_cost(recipe("iser", "randread", 4096), "roce", 1500)
    ack = ROCE + 4
    assert cost.wire_out == (76 + ROCE) + ack + ack
    assert cost.wire_in == ack + (1024 + ROCE + 16) + 3 * (1024 + ROCE) + (76 + ROCE)
    assert cost.ack_frames == 3


def test_srp_write_64k_on_fdr_uses_rdma_read():
    cost = wire_cost(recipe("srp", "randwrite", 65536), "ib", 4096)
    # out: SRP_CMD 64 + 16 READ-response packets (AETH on first and last); in: ACK of the
    # command, READ request (RETH), SRP_RSP 36 (+ACK out).
    assert cost.wire_out == (64 + IB) + 16 * (4096 + IB) + 2 * 4 + (IB + 4)
    assert cost.wire_in == (IB + 4) + (IB + 16) + (36 + IB)


def test_nvme_tcp_in_capsule_limit():
    small = recipe("nvme-tcp", "randwrite", 16384)
    big = recipe("nvme-tcp", "randwrite", 32768)
    assert [m.label for m in small.messages] == ["capsule-cmd+data", "capsule-resp"]
    assert [m.label for m in big.messages] == ["capsule-cmd", "r2t", "h2c-data", "capsule-resp"]
    assert small.messages[0].size == 72 + 16384


def test_nvme_rdma_inline_write_has_no_rdma_read():
    assert [m.kind for m in recipe("nvme-rdma", "write", 4096).messages] == ["send", "send"]
    assert "read_req" in [m.kind for m in recipe("nvme-rdma", "write", 8192).messages]


def test_iwarp_fpdu_framing():
    # One 4 KiB RDMA WRITE on MTU 1500: room per FPDU = 1448 - 16 - 4 = 1428 bytes,
    # then the 16-byte CQE in an untagged SEND (2 + 18 + 16 + 4 = 40 bytes).
    cost = wire_cost(recipe("nvme-rdma", "read", 4096), "iwarp", 1500)
    write_fpdus = [1428, 1428, 1240]
    data_in = sum(16 + c + (-(16 + c) % 4) + 4 + TCP + ETH for c in write_fpdus)
    assert cost.wire_in == data_in + (40 + TCP + ETH)
    # siw pushes every FPDU, so the host acknowledges the first two full ones
    # (more than one MSS) and then the two short ones (ICSK_ACK_PUSHED2).
    assert cost.ack_frames == 2
    assert cost.wire_out == (2 + 18 + 64 + 4 + TCP + ETH) + 2 * (TCP + ETH)


def test_bound_is_rate_over_busier_direction():
    cost = wire_cost(recipe("iser", "randread", 65536), "roce", 9000)
    assert wire_bound_iops(cost, 40) == pytest.approx(40e9 / 8 / cost.wire_in)
    assert cost.wire_in > cost.wire_out


def test_infiniband_data_rates():
    assert data_rate_gbps("ib", 56) == pytest.approx(54.55)
    assert data_rate_gbps("ib", 40) == 32.0
    assert data_rate_gbps("eth", 40) == 40.0
