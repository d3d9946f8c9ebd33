// ODRP's MN-side WR chains ([ODRP] §2.4, §4.2-4.4, Figure 6) on the MN's
// RNIC, and the CN side that invokes them. After OdrpMetadata::Create / AddCn and
// Chain::Arm (MN CPU, setup only), a request runs entirely on the RNIC: no MN
// CPU on the data path, and the chain instances are re-armed by the CN's own
// request arguments (client-assisted recycling, [ODRP] §4.4), so a chain
// serves any number of requests with `slots` pre-posted instances.
//
// Written: Load, Unmapped Store, Mapped Store, Invalidate, all pipelined.
//
// Chains per CN (odrp.h "Chains per CN"): ONE chain per kind per CN, each
// pipelined (W lanes, up to W requests inside it at once; "Pipelining"
// below, then per kind: "Pipelining Mapped Store", "Pipelining Unmapped
// Store and Invalidate"). Every kind has the same frame: one R, W lanes
// L_w/C_w, the gate gcq, re-arm lag W + 1, slots = 4W, C_w's instance a
// list of stages (ENABLE L_w up to a WQE, WAIT lcq_w for a count) ending in
// WAIT gcq and ENABLE R; only the L steps and R0 differ.
//
// ---- Pipelining (Load; issue 13) -----------------------------------------------
// After OneSidedMW's allocation chain (alloc_chain.h): one R (RQ + managed
// SQ) and W lanes, each an L_w and a C_w of its own (looped back, managed);
// request n runs on lane w = n mod W as the lane's instance j = n / W (ring
// slot n mod slots, slots = 4W: each lane ring holds 4 instances).
//   - R's instance is R0 (the reply) and R1 = SEND_ENABLE C_w -> the lane's
//     next instance. No WAIT on R0's ack: no instance waits for a CN round
//     trip (the one-request layout had R1 WAIT rscq there).
//   - The gate: C_w's instance enables R's instance n only after its own L
//     step landed (WAIT lcq_w) and after instance n-1 enabled its part
//     (WAIT gcq >= n; gcq counts the C_w ENABLEs of R, all lanes): an ENABLE
//     enables every WQE below its index, so n's ENABLE must not release
//     n-1's R0 before n-1's L1 landed. R then replies in request order.
//   - The ticket T: L_w's instance begins by zeroing the page address of the
//     R0 the lane ran before (C_w's instance is enabled only from that R0's
//     tail, R1). Every R0 that runs before its own L1 landed finds 0 and
//     faults. Why that holds for any R0(n) that succeeds, by induction on n:
//     R0(n-W) ran before it (R is in order) and succeeded, so L1 of the
//     lane's instance j-1 ran this lap; L_w is in order, so the T of lane
//     instance j - slots/W + 1 <= j-1 (slots/W >= 2) had zeroed R0(n)'s
//     field before, and only L1 of instance j writes it after. So R never
//     sends a page address an earlier request read (chains_test
//     AnEarlyInstanceOfAPipelinedLoadChainNeverSendsAStalePage, which fails
//     with T replaced by a NOP; ARaisedEnableNeverMakesLoadSendAStalePage).
//   - Re-arm lag W + 1: the CN sends request n only after reply n-W arrived;
//     R's tail of n-W may still be pending then, that of n-W-1 has run (R is
//     in order), and with it every WQE of instance n-W-1 (C_w enabled R0
//     before). So request n re-arms instance n - W - 1 + slots.
//   - Faults: a refused request faults R at its R0 (L1 refused: L_w goes to
//     ERR, C_w's WAIT counts the error completion and opens the gate, R0
//     finds the 0 T left; an unmapped entry: R0 finds the 0 L1 read). R's
//     ERR flushes every R0 the CN had not acknowledged yet, also those of
//     EARLIER requests, so the first deadline to pass need not be the
//     refused request's: the MN CPU names it (RefusedRequest: the R0 R started
//     last), and the CN retries the others on the rebuilt chain (odrp.h
//     "Refusals"). After a fault, a lane whose C_w still had an instance
//     enabled runs it once (flush completions pass its WAITs): an L1 on the
//     previous lap's tt_addr (the same CN's own entry, or a fault) whose R0
//     never runs (R is in ERR). Load changes no MN state, so nothing needs
//     repair.
// Cost (sim, `dmbench micro access --system odrp --op read`): see odrp.h
// "Chains per CN".
//
// ---- Pipelining Mapped Store (issue 13) -----------------------------------------
// Load's layout (one R, W lanes L_w/C_w, the gate gcq, re-arm lag W + 1,
// slots = 4W), but R0 consumes no result of a data step: the one-request
// chain's 0-byte notification, released early (C's counts are CN values) or
// after its L step faulted, would tell the CN a store is done that never
// ran. So R0 is an 8-byte WRITE_WITH_IMM whose SOURCE address only M3 sets
// (FENCE: after the store M2 completed) and the lane's ticket T zeroes, and
// the CN gives a reply word to receive it (the last 8 bytes of the
// request's header slot; its MR allows remote write). The induction of
// "Pipelining" holds word for word with M3 in L1's place: an R0 whose M3
// has not run this lap finds 0 and faults (chains_test
// AnEarlyNotificationOfAPipelinedMappedStoreNeverReportsAStoreThatNeverRan,
// which fails with T a NOP).
//   T's second field, M1's tt_addr of the lane's previous instance: when R
//     goes to ERR an RNIC that flushes every outstanding RECV completes
//     them into rcq, and C_w's WAIT on rcq counts flush completions, so a
//     lane whose next C_w instance R1 had enabled runs it once more with no
//     request: M1 on the tt_addr that slot had a lap before and M2 on the
//     page it staged then, over the newer bytes the CN stored since (Load
//     only reads: harmless there). With T the replayed M1 reads address 0
//     and is refused. The sim flushes RECVs only up to those the MN CPU
//     posted (the first lap, whose instances hold tt_addr 0 anyway), so the
//     replay cannot run in it; chains_test
//     AFinishedPipelinedStoreLeavesNoTtAddrToReplay checks the invariant
//     (every instance but each lane's last holds 0; fails without the SGE).
//   Faults: a refused M1 (misaligned, outside the CN's table) or M2 (an
//     unmapped entry: null local address) moves L_w to ERR. In the first
//     lap the flush completes M3 too, C_w's WAITs pass and R0 faults on T's
//     0, as Load. After it the sim flushes no ring WQE beyond the MN CPU's
//     post, so C4's WAIT for M3 is never met: the gate holds R before the
//     refused request's R0, and every later request waits behind it (their
//     L steps may run: stores that the CN retries, idempotently, on the
//     rebuilt chain). Either way RefusedRequest names the refused request
//     (R in ERR: the R0 R started last, if its lane's M1..M3 did not all
//     succeed; R live: gcq's count, the request the gate has not released,
//     if its lane's L_w is in ERR), and odrp.cc handles the rest as for
//     Load (odrp.h "Refusals"): the CN retries the others.
// Cost (sim, `dmbench micro access --system odrp --op write`): see odrp.h
// "Chains per CN".
//
// ---- Pipelining Unmapped Store and Invalidate (issue 13) -------------------------
// Mapped Store's frame: R0 is the 8-byte WRITE_WITH_IMM from the source only
// the last L step N sets (a READ of the chain's notify word, FENCE: after
// every earlier step of the instance completed) and the lane's ticket T
// zeroes, so an R0 released early (C_w's counts are CN values) or after its
// L steps faulted finds 0 and faults: it never reports an allocation or a
// free that did not run (chains_test
// AnEarlyNotificationOfAPipelinedUnmappedStoreNeverReportsAStoreThatNeverRan
// fails with T a NOP). T's second field is the previous instance's ta[s]
// (the CN's tt_addr copy): an instance run again with no request (a flushed
// RQ passes C_w's WAIT on rcq) reads tt_addr 0 and is refused at CHK / V3.
// Per lane, per instance (j = n / W), C_w's stages: Unmapped Store 3
// (T..A2 | U4, CHK | U7, U5, U6, N), Invalidate 4 (T..V2 | V3 | V4, V7,
// V5, V6 | V8, N); 16 WQEs each on L_w and C_w, 2 on R.
// Order within the last stages, so that a lane stopped between two stages
// (the MN's rebuild stops C_w first) never leaves harm: Unmapped Store
// stores the page (U7) BEFORE it maps it (U5) and zeroes the element (U6)
// after: stopped before U5, the page is only claimed (its element still in
// the ring: RingRepair moves it back); from U5 on it is the request's page,
// holding its bytes. Invalidate unmaps (V7) BEFORE it claims the tail (V5):
// stopped after V7 and before V8 the page is unmapped and not queued, which
// the MN completes (odrp.h "Recovery": Enqueue, or Fill of the claimed
// tail position); before V7 nothing changed.
// Recovery with W lanes: several lanes can fault on one empty queue (each
// after its U1 claimed a position), and in lap 0 a fault that flushes R's
// RQ lets every lane run its next instance once (a claim each, refused at
// CHK on tt_addr 0). The MN reads every lane's last instance (LastInstance:
// L_w runs in order, so only that one can be partial; steps counts the
// WQEs it started) after StopControl and WorkersSettled (every started step
// completed), as OneSidedMW's Inspect (odrp.h "Recovery").
// Faults: a refused request (CHK / V3: misaligned or outside the CN's
// table; V4: an unmapped entry) or an empty queue (U7) moves L_w to ERR; R0
// then faults on T's 0 (lap 0: the flush passes C_w's WAITs) or the gate
// holds R (later laps: C_w waits for N forever). Requests flushed or held
// behind it may have run on their own lanes: the CN asks the MN whether
// their entry is mapped (EntryIsMapped) and retries those that did not run.
// Cost (sim, `dmbench micro alloc --system odrp`): see odrp.h "Chains per
// CN".
//
// ---- QPs per chain (all on the MN, in the MN's one PD) ----------------------
//   R  CN-facing (connected to the CN's chain QP). RQ: one RECV per slot takes
//      the CN's SEND and scatters its arguments into later WQEs. SQ (managed):
//      the reply to the CN and the tail (R1) that enables the lane's next C_w
//      instance. qp_access_flags = 0: the CN can only SEND to it (no
//      READ/WRITE/atomic through R).
//   L_w worker of lane w, looped back to itself (managed SQ): READ/WRITE/FAA
//      on MN memory. Unreachable from any CN.
//   C_w control of lane w, looped back (managed SQ): WAITs on completion
//      counts and SEND_ENABLEs the next stage of L_w or R, so every WQE a
//      previous WR rewrote is fetched only after the rewrite landed ([ODRP]
//      footnote 1: "we need an ENABLE WR before the modified WR"). The sim
//      would also honour FENCE for that, a real RNIC prefetches WQEs.
//   1 + 2W QPs per chain.
// CQs (all count-only, ignore_overrun): rcq (R's RECVs), rscq (R's sends),
// lcq_w (L_w's signaled steps), gcq (every C_w's signaled ENABLE of R: the
// gate, and C_w's errors).
// All three SQs are managed: they run only up to the index the last
// SEND_ENABLE set, which may lie beyond what the MN CPU posted; the RNIC then
// re-reads the ring slot index % ring_size. That is how an executed instance
// runs again (the WQEs are not erased, [ODRP] §4.4).
//
// ---- Instance geometry ------------------------------------------------------
// Request n (n = 0, 1, ...) is served by instance s = n % slots, on lane w =
// n % W as the lane's instance j = n / W. R's instance occupies WQEs
// [n*r_wrs, (n+1)*r_wrs) of R's SQ; L_w's and C_w's occupy [j*k, (j+1)*k) of
// the lane's SQs (k = l_wrs, c_wrs per kind, powers of two padded with NOPs
// so that slots/W * k is the lane ring's size exactly). Every WAIT count and
// ENABLE index below is written in those absolute indices.
//
// ---- Load(tt_addr, dst, rkey, seq) -> page ([ODRP] §4.3 "Page load") ---------
// Request n on lane w = n mod W, the lane's instance j = n / W (W = lanes).
//   RECV   (R)  args -> L1.remote_addr (tt_addr), R0.remote_addr+rkey (the
//               CN's buffer), R0.imm (seq); re-arm values -> instance n-W-1
//   C0  WAIT rcq >= n+1                      (the request has landed)
//   C1  SEND_ENABLE L_w -> 2(j+1)            (T, L1)
//   L0  T   READ the meta zero word -> R0.sge[0].addr of the lane's previous
//           instance (n-W), unsignaled: the lane's ticket (see
//           "Pipelining"). An R0 released before its own L1 landed finds 0
//           and faults (LOC_PROT_ERR) instead of sending a page an earlier
//           request loaded, which the CN may have freed since and another
//           CN may hold.
//   L1  FETCH_ADD 0 on the TT entry (rkey tt[c]) -> R0.sge[0].addr (the
//       page address, BE): a READ that refuses a misaligned tt_addr
//       (atomics must be 8-byte aligned: REM_INV_REQ, L_w goes to ERR; an
//       8-byte READ at tt_base + 8k + 1 would hand R0 entry k shifted left
//       by 8 bits, which can name another CN's page) and, by tt[c]'s bounds,
//       one outside the CN's table (REM_ACCESS_ERR). Signaled (lcq_w).
//   C2  WAIT lcq_w >= j+1                    (L1 landed in R0)
//   C3  WAIT gcq >= n                        (instances < n enabled their R0)
//   C4  SEND_ENABLE R -> 2(n+1), signaled into gcq
//   C5..C7 NOP (padding: C_w's instance is 8 WQEs)
//   R0  WRITE_WITH_IMM 4 KB from the page (lkey pool) to the CN's buffer,
//       imm = seq: the data and the notification in one WR. Signaled
//       (rscq: Idle, RefusedRequest). An unmapped entry (0), or the 0 T left
//       when L1 did not run, gives a null local address: LOC_PROT_ERR, R
//       goes to ERR, the CN gets nothing ([ODRP] §4.5.2 (3)).
//   R1  SEND_ENABLE C_w -> 8(j+2)            (the lane's next instance)
//   12 WQEs per request (the one-request layout had 10, with R's WAIT on
//   the CN's ack).
//
// ---- UnmappedStore(tt_addr, reply, rkey, page, seq) ([ODRP] §4.3 "Unmapped page store")
// Request n on lane w = n mod W, the lane's instance j = n / W (see
// "Pipelining Unmapped Store and Invalidate"). 11 signaled L steps.
//   RECV   (R)  args -> ta[s] (tt_addr, MN scratch), R0.remote_addr+rkey
//               (the CN's reply word), R0.imm (seq); re-arm values ->
//               instance n-W-1; the 4 KB page -> staging[s]
//   C0  WAIT rcq >= n+1
//   C1  SEND_ENABLE L_w -> 16j+7             (T, S, U1, U2, U3, A1, A2)
//   L0  T  READ 16 zero bytes -> R0.sge[0].addr and ta[] of the lane's
//          previous instance (n-W), unsignaled: the ticket.
//   L1  S  READ ta[s] -> snap[s] (unsignaled): the one read of the CN's
//          tt_addr. A1 and A2 copy the snapshot, so the address checked is
//          the address written even if a RECV rewrites ta[s] meanwhile (a
//          CN that lowered C0 runs L before its request lands; two READs of
//          ta[s] could straddle the RECV's scatter: chains_test
//          TheCnsTtAddrIsReadOncePerInstance, and
//          OdrpChainRace.ALateRequestNeverSplitsTheEntryCheckedFromTheEntryWritten)
//   L2  U1 masked FAA head += 8 (boundary BoundaryMask) -> faa[s] (LE: the
//          claimed element's address)
//   L3  U2 EndianSwap: READ faa[s], 8 reversed 1-byte SGEs -> L7.remote_addr
//          (FENCE: after U1's result and S landed; it reads data, not a WQE)
//   L4  U3 EndianSwap: READ faa[s] the same way -> L11.remote_addr (after U1:
//          it follows the fenced U2). ODRP's Figure 6 has one EndianSwap
//          here; we need two because U4 (read the element) and U6 (zero it)
//          both take the element's address and a READ scatters each source
//          byte to one place only.
//   L5  A1 READ snap[s] -> L8.remote_addr    (tt_addr for CHK; after S: it
//          follows the fenced U2)
//   L6  A2 READ snap[s] -> L10.remote_addr   (tt_addr for U5)
//   C2  WAIT lcq_w >= 11j+4                  (U1, U2, U3, A1 landed)
//   C3  SEND_ENABLE L_w -> 16j+9             (U4, CHK)
//   L7  U4 READ the element (the free page's address, BE) -> L9.sge[0].addr
//          (FENCE: after U2 landed in its remote address, and U3)
//   L8  CHK FETCH_ADD 0 on the TT entry (rkey tt[c]) -> chk[s] (FENCE: after
//          U4 landed; A1 landed before C3). Refuses a misaligned tt_addr
//          (REM_INV_REQ) or one outside the CN's table (REM_ACCESS_ERR):
//          L_w goes to ERR and U7.. never run. Without it U5's 8-byte WRITE
//          at tt_base + 8k + 1 stored the page address shifted right by 8
//          bits in entry k, which can name another CN's page (chains_test
//          AMisalignedUnmappedStoreCannotForgeAnEntryToAnotherCnsPage,
//          AMisalignedUnmappedStoreAmongStoresInFlightCannotForgeAnEntry).
//   C4  WAIT lcq_w >= 11j+7                  (A2, U4, CHK landed)
//   C5  SEND_ENABLE L_w -> 16(j+1)           (U7, U5, U6, N, NOPs)
//   L9  U7 READ staging[s] (4 KB) into the page (lkey pool): the store,
//          BEFORE the page is mapped (FENCE: after CHK passed and U4 landed
//          in this local address). A null page address (empty queue) fails
//          the local check: L_w goes to ERR, nothing is mapped.
//   L10 U5 WRITE L9.sge[0].addr (8 B, read out of L_w's own WQE) -> the TT
//          entry (rkey tt[c]): map the page (after U7's FENCE)
//   L11 U6 WRITE 8 zero bytes -> the element (empty-queue detection)
//   L12 N  READ the chain's notify word -> R0.sge[0].addr (FENCE: after U7
//          completed; U5 and U6 execute on the in-order loopback responder
//          before N's READ is served)
//   L13..L15 NOP
//   C6  WAIT lcq_w >= 11(j+1)                (N landed in R0)
//   C7  WAIT gcq >= n                        (instances < n enabled their R0)
//   C8  SEND_ENABLE R -> 2(n+1), signaled into gcq
//   C9..C15 NOP
//   R0  WRITE_WITH_IMM 8 B from N's source (zeros) to the CN's reply word,
//       imm = seq: the notification (T's 0: faults)
//   R1  SEND_ENABLE C_w -> 16(j+2)           (the lane's next instance)
//   A refused request (CHK) or an empty queue (U7) faults L_w after U1
//   claimed a position and U4 read its element (both fenced before the
//   fault), so the MN's repair (odrp.h "Recovery") reads that lane's last
//   instance (LastInstance, ClaimedPosition, DequeuedElement): the element
//   is still in its slot (U6 never ran) and RingRepair moves it back.
//   The page lands with a loopback READ (staging -> page) rather than a
//   WRITE so that a FENCE (N's) can order on its completion.
//   Cost of the check (sim, 1 thread, one-request chain, `dmbench micro
//   alloc`): 12.2 -> 13.5 us per allocation (0.7 us of it CHK's FENCE);
//   the snapshot S: 13.49 -> 13.74 us.
//
// ---- MappedStore(tt_addr, reply, rkey, page, seq) ([ODRP] §4.3 "Mapped page store")
// Request n on lane w = n mod W, the lane's instance j = n / W (W = lanes;
// see "Pipelining Mapped Store").
//   RECV   (R)  args -> M1.remote_addr (tt_addr), R0.remote_addr+rkey (the
//               CN's reply word), R0.imm (seq); re-arm values -> instance
//               n-W-1; the 4 KB page -> staging[s]
//   C0  WAIT rcq >= n+1                      (the request has landed)
//   C1  SEND_ENABLE L_w -> 4j+2              (T, M1)
//   L0  T   READ 16 zero bytes (chain scratch) -> R0.sge[0].addr and
//           M1.remote_addr of the lane's previous instance (n-W),
//           unsignaled: the lane's ticket. An R0 released before its own M3
//           landed faults (LOC_PROT_ERR) instead of reporting a store that
//           never ran; an instance run again without a request refuses its
//           M1 instead of storing a stale page.
//   L1  M1 FETCH_ADD 0 on the TT entry (rkey tt[c]) -> M2.sge[0].addr
//          (the page address, BE): a READ that refuses a misaligned tt_addr
//          (atomics must be 8-byte aligned: REM_INV_REQ, L_w goes to ERR)
//          and one outside the CN's table (REM_ACCESS_ERR). Signaled (lcq_w).
//   C2  WAIT lcq_w >= 3j+1                   (M1 landed in M2)
//   C3  SEND_ENABLE L_w -> 4(j+1)            (M2, M3)
//   L2  M2 READ staging[s] (4 KB) into the page (lkey pool): the store, in
//          place (FENCE: after M1 landed in its local address). An
//          unmapped entry (0) gives a null local address: the local check
//          fails, L_w goes to ERR, M3 never runs (nothing written).
//   L3  M3 READ the chain's notify word (BE: the address of the 16 zero
//          bytes) -> R0.sge[0].addr (FENCE: after M2 COMPLETED, so the
//          page holds the bytes before R0 can have a source). Signaled.
//   C4  WAIT lcq_w >= 3(j+1)                 (M3 landed in R0)
//   C5  WAIT gcq >= n                        (instances < n enabled their R0)
//   C6  SEND_ENABLE R -> 2(n+1), signaled into gcq
//   C7  NOP (padding: C_w's instance is 8 WQEs)
//   R0  WRITE_WITH_IMM 8 B from M3's source (lkey scratch: zeros) to the
//       CN's reply word, imm = seq: the notification. Signaled (rscq: Idle,
//       RefusedRequest). T's 0 (M3 did not run) faults it: R goes to ERR.
//   R1  SEND_ENABLE C_w -> 8(j+2)            (the lane's next instance)
//   14 WQEs per request (the one-request chain had 12: L 4 with a NOP, R 4,
//   C 4).
//   Load with the direction reversed; the loopback READ M2 (not a WRITE)
//   lets M3's FENCE order the notification's source after the data, as U7
//   does for L11. (RC READ responses also come back in order, so the sim
//   shows no difference without M3's FENCE and no test fails without it;
//   the FENCE keeps the argument independent of how an RNIC places
//   response data. Its price, measured by removing it: 1 thread 10.56 ->
//   9.69 us, 24 threads 22.2 -> 18.5 us.)
//   Against ODRP's own chain (RECV, READ the entry, WRITE page buf -> page,
//   WRITE the notification), what we do beyond it and why the simulated
//   RNIC needs it (issue 13):
//   - M2, the 4 KB copy, is ODRP's step 3, the same loopback transfer, not
//     an extra one (a READ here so that a FENCE can order on its
//     completion; a WRITE's completion would not).
//   - M1 is a FETCH_ADD of 0 where ODRP READs: it refuses a misaligned
//     tt_addr (an 8-byte READ at tt_base + 8k + 1 would store into a page
//     formed of two entries' bytes).
//   - The C2/C3 gate before M2 (footnote 1: a real RNIC fetches M2 only
//     after M1 rewrote it; the sim's FENCE alone would order it).
//   - T and M3, the 8-byte notification, C4 and the gcq gate: the price of
//     several stores in one chain (above); ODRP does not say how its
//     pipelined chains order a notification after its own store.
//   Measured (sim, `dmbench micro access --system odrp --op write`, mean):
//   1 thread 8.27 us one-request -> 10.56 us pipelined (ODRP states 4.6
//   us; issue 14 prices the gated step); 24 threads 198 -> 22.2 us (with
//   mapped_store_lanes = 1: 253 us, one at a time).
//
// ---- Invalidate(tt_addr, reply, rkey, seq) ([ODRP] §4.3 "Page invalidation", §4.5.2)
// Request n on lane w, the lane's instance j (as Unmapped Store). 9
// signaled L steps.
//   RECV   (R)  args -> ta[s] (tt_addr, MN scratch), R0.remote_addr+rkey
//               (the CN's reply word), R0.imm (seq); re-arm values ->
//               instance n-W-1
//   C0  WAIT rcq >= n+1
//   C1  SEND_ENABLE L_w -> 16j+4             (T, S, V1, V2)
//   L0  T  as Unmapped Store's (R0 source and ta[] of the previous instance)
//   L1  S  READ ta[s] -> snap[s] (unsignaled): the one read of the CN's
//          tt_addr (a late RECV cannot make V3 check one entry and V7 unmap
//          another, leaving a freed page mapped)
//   L2  V1 READ snap[s] -> L4.remote_addr    (tt_addr for the TT READ;
//          FENCE: after S landed)
//   L3  V2 READ snap[s] -> L6.remote_addr    (tt_addr for the unmap)
//          The CN sends tt_addr ONCE and the chain copies it, so the entry
//          checked and freed is the entry unmapped.
//   C2  WAIT lcq_w >= 9j+2                   (V1, V2 landed)
//   C3  SEND_ENABLE L_w -> 16j+5             (V3)
//   L4  V3 FETCH_ADD 0 on the TT entry (rkey tt[c]) -> L5.remote_addr (the
//          page address, BE); a misaligned tt_addr fails here, as in M1
//          (FENCE: after V1 landed in its remote address)
//   C4  WAIT lcq_w >= 9j+3                   (V3 landed in L5)
//   C5  SEND_ENABLE L_w -> 16j+9             (V4, V7, V5, V6)
//   L5  V4 the check ([ODRP] §4.5.2): READ 8 B AT the page (rkey pool) ->
//          chk[s]. An unmapped entry (0), or anything that is not a pool
//          address, fails the responder's bounds check (REM_ACCESS_ERR): L_w
//          goes to ERR before anything was changed (FENCE: after V3 landed
//          in its remote address).
//   L6  V7 WRITE 8 zero bytes (meta zero word) -> the TT entry: unmap, before
//          the page re-enters the queue, so no other CN can be handed a page
//          this CN still has mapped (FENCE: after V4 completed, i.e. the
//          check passed; V2 landed before C3)
//   L7  V5 masked FAA tail += 8 (BoundaryMask) -> faa[s] (LE: the old tail;
//          after the unmap: it follows the fenced V7)
//   L8  V6 EndianSwap: READ faa[s] -> L9.remote_addr (FENCE: after V5)
//   C6  WAIT lcq_w >= 9j+7                   (V6 landed in L9)
//   C7  SEND_ENABLE L_w -> 16(j+1)           (V8, N, NOPs)
//   L9  V8 WRITE L5.remote_addr (8 B, read out of L_w's own WQE: the page
//          address, BE) -> the old tail element (rkey meta): enqueue (FENCE:
//          after V6 landed in its remote address)
//   L10 N  READ the notify word -> R0.sge[0].addr (FENCE; the loopback
//          responder serves it after V7 and V8: the one-request chain's V9,
//          a READ only there to order the notification, is N now)
//   L11..L15 NOP
//   C8  WAIT lcq_w >= 9(j+1)                 (N landed in R0)
//   C9  WAIT gcq >= n
//   C10 SEND_ENABLE R -> 2(n+1), signaled into gcq
//   C11..C15 NOP
//   R0, R1 as Unmapped Store's.
//   A refused invalidation (V3, V4) faults L_w before V7: ring, tail and
//   TT are untouched, the CN gets no reply.
//
// ---- Ordering of results (issue 13 audit) ----------------------------------------
// Every L step that consumes an earlier L step's result (a scratch word an
// FAA/READ wrote, or a WQE field a READ rewrote) is ordered by the RNIC: a
// FENCE on it, or on an earlier step of the same SQ (U3, CHK's A1, U5 and
// U6 behind U7, V7's V2, V5 behind V7), never only by C's WAIT/ENABLE
// values, which come from the CN
// (RearmValues): a CN that raises an ENABLE index or lowers a WAIT count
// makes C release the step early, and the FENCE still holds it. In the
// honest run C's WAIT already waited for those completions, so these FENCEs
// cost nothing (M2, U4, U7, V3, V4, V7, V8; chains_test
// OpenGatesNeverMakeAStepConsumeAStaleResult fails without them). The sim
// fetches a WQE when it executes it, after its FENCE; a real RNIC that
// prefetches WQEs relies on the ENABLE as well ([ODRP] footnote 1).
// Across QPs (no FENCE reaches from one SQ to another):
//   Load R0 <- L1 (the page address): released by C_w's ENABLE of R after
//     WAITs on lcq_w and gcq, all re-arm values. Closed by the ticket T: an
//     R0 whose L1 has not run this lap holds 0 and faults
//     (ARaisedEnableNeverMakesLoadSendAStalePage,
//     AnEarlyInstanceOfAPipelinedLoadChainNeverSendsAStalePage).
//   Mapped Store R0 <- M3 (its source) <- M2 (FENCE): released by C_w's
//     ENABLE after WAITs, all re-arm values; closed by T as Load's
//     (AnEarlyNotificationOfAPipelinedMappedStoreNeverReportsAStoreThatNeverRan).
//   Unmapped Store's and Invalidate's R0 <- N (its source) <- U7 / V8: as
//     Mapped Store's, closed by T
//     (AnEarlyNotificationOfAPipelinedUnmappedStoreNeverReportsAStoreThatNeverRan).
//   L's first steps <- the RECV (C0's WAIT on rcq, a re-arm value): L run
//     early takes the arguments of this instance's previous request, which
//     the same CN sent and every chain re-checks (the atomic entry reads,
//     V4): not even that, T zeroed the previous instance's tt_addr (M1's
//     field, ta[]), so M1 / CHK / V3 refuse it (Unmapped Store: after U1
//     claimed a position, which the MN's repair moves back).
//   Unmapped Store's and Invalidate's tt_addr <- the RECV (ta[s]): a CN that
//     lowered C0's count could get its RECV to land while L copies ta[s].
//     Closed by S: ta[s] is read once per instance, into snap[s], which A1
//     and A2 (V1 and V2) copy, so the entry checked (CHK; V3/V4) is the
//     entry written (U5; V7). The sim cannot show the old two-READ hole by
//     timing (its loopback responder served A1's and A2's reads of ta[s] at
//     one instant: bisected to 1 ps, nothing lands between), a real RNIC's
//     two DMA reads can straddle the scatter; chains_test checks the
//     invariant (TheCnsTtAddrIsReadOncePerInstance, 2 reads before) and
//     sweeps the landing time (OdrpChainRace).
//   R1's ENABLE of C_w: C_w's next instance gates only on counts; a raised
//     index runs C_w ahead, which is the "L run early" case above.
//
// ---- Notification ------------------------------------------------------------
// WRITE_WITH_IMM (not the paper's flag WRITE): the CN awaits a CQE instead of
// polling a flag in a loop that would have to sleep in virtual time; the imm
// carries the request's sequence number (checked by the CN), and for Load the
// data and the notification are one WR; the other kinds send 8 bytes (zeros)
// from the source only their last L step sets (T zeroes it: "Pipelining
// Mapped Store") to the CN's reply word, the last 8 bytes of the request's
// header slot (kHeaderStride). The CN pre-posts one RECV (no SGEs) per
// request.
//
// ---- Recycling without the MN CPU ([ODRP] §4.4) --------------------------------
// Every value in an instance that depends on the request number is a WAIT
// count or an ENABLE index (absolute), plus the RQ doorbell record. The CN
// computes them (RearmValues) for request m = n - lag + slots (lag = W + 1)
// and sends them in request n; R's RECV scatters them into instance
// (n - lag) % slots, which by then has fully started (the CN sends request
// n only after reply n - W arrived; R's tail of n - W - 1 has run then, and
// with it every WQE of that instance: "Pipelining"), slots / W >= 4, a
// power of two. The same RECV writes the doorbell record =
// max(n + slots - W, slots): the RNIC reads the doorbell when a SEND
// arrives, so the consumed RECVs count as posted again (the RECV WQEs
// themselves never change). WAITs count flush completions too, so after a
// fault a lane may run one more instance on counts alone: T makes it
// harmless (its R0 source and tt_addr are 0).
//
// ---- Faults ----------------------------------------------------------------------
// A faulted chain (a QP in ERR) serves nothing until the MN CPU rebuilds it
// (a new Chain; odrp.h OdrpMnSide::RebuildChain, with Stop, Idle and the
// recovery accessors below). Empty queue: the failed dequeue has
// advanced the head past the (zero) element; [ODRP] §4.3 also leaves that to
// the MN CPU (RingRepair, odrp.h "Empty queue").
//
// ---- Not written yet ---------------------------------------------------------------
// Per-CN budgets. (Misaligned and out-of-table tt_addr are refused on every
// chain by an 8-byte atomic on the entry: Load L1, Unmapped Store CHK, Mapped
// Store M1, Invalidate V3; [ODRP] §4.5.2.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fabric/node.h"
#include "systems/common/chain_teardown.h"
#include "systems/common/chain_wr.h"
#include "systems/common/reply_deadlines.h"
#include "systems/common/wait_list.h"
#include "systems/odrp/layout.h"
#include "systems/status.h"

namespace dmb::systems::odrp {

struct MnConfig {
  uint64_t pages = 64;  // the page pool (all of it starts in the free page queue)
};

// One CN's translation table on the MN.
struct CnTable {
  uint32_t cn = 0;
  uint64_t tt_base = 0;  // shared with the CN ([ODRP] §3 "client-assisted")
  uint64_t entries = 0;  // swap pages of that CN
  fabric::Mr* mr = nullptr;
};

// The MN's ODRP state, set up once by the MN CPU: page pool, free page queue
// (every page enqueued, head at element 0), translation tables. After that
// only WR chains change it; the Load* accessors are MN CPU reads for tests and
// for a future control path (recovery).
class OdrpMetadata {
 public:
  static Task<std::unique_ptr<OdrpMetadata>> Create(fabric::Cluster* cluster, fabric::Node* mn,
                                                    MnConfig cfg);
  // Allocates and registers a zeroed TT for a new CN (its own MR).
  Task<const CnTable*> AddCn(uint64_t swap_pages);

  fabric::Cluster* cluster() const { return cluster_; }
  fabric::Node* node() const { return mn_; }
  fabric::Pd* pd() const { return pd_; }
  const MnLayout& layout() const { return layout_; }
  fabric::Mr* pool_mr() const { return pool_mr_; }
  fabric::Mr* meta_mr() const { return meta_mr_; }
  fabric::Qp* boot_qp() const { return boot_; }
  const CnTable* cn(uint32_t i) const { return cns_.at(i).get(); }

  uint64_t page_addr(uint64_t i) const { return pool_ + i * kPageBytes; }
  uint64_t ring_addr() const { return meta_; }
  uint64_t element_addr(uint64_t slot) const { return meta_ + layout_.element_off(slot); }
  uint64_t head_addr() const { return meta_ + layout_.head_off(); }
  uint64_t tail_addr() const { return meta_ + layout_.tail_off(); }
  uint64_t zero_addr() const { return meta_ + layout_.zero_off(); }

  // MN CPU reads.
  uint64_t LoadHead() const { return mn_->memory().LoadU64(head_addr()); }
  uint64_t LoadTail() const { return mn_->memory().LoadU64(tail_addr()); }
  uint64_t LoadElement(uint64_t slot) const;                    // page address, 0 = empty
  uint64_t LoadTtEntry(uint32_t cn, uint64_t swap_addr) const;  // page address, 0 = unmapped

 private:
  OdrpMetadata() = default;

  fabric::Cluster* cluster_ = nullptr;
  fabric::Node* mn_ = nullptr;
  MnLayout layout_;
  fabric::Pd* pd_ = nullptr;
  uint64_t pool_ = 0;
  uint64_t meta_ = 0;
  fabric::Mr* pool_mr_ = nullptr;
  fabric::Mr* meta_mr_ = nullptr;
  fabric::Cq* boot_cq_ = nullptr;
  fabric::Qp* boot_ = nullptr;  // posts the one SEND_ENABLE that starts each chain's C
  std::vector<std::unique_ptr<CnTable>> cns_;
};

enum class ChainKind : uint8_t { kLoad, kUnmappedStore, kMappedStore, kInvalidate };
const char* ChainKindName(ChainKind k);

// What both ends agree on (the MN tells the CN at connection time).
struct ChainGeometry {
  ChainKind kind = ChainKind::kLoad;
  uint32_t slots = 4;  // pre-posted instances (all lanes): a power of two, >= 4 x lanes
  // W lanes (L_w, C_w) behind one R: request n runs on lane n mod W, and
  // the CN keeps up to W requests in flight ("Pipelining").
  uint32_t lanes = 1;
  uint32_t l_wrs = 0;  // WQEs per instance on L (L_w), R, C (C_w)
  uint32_t r_wrs = 0;
  uint32_t c_wrs = 0;
  static ChainGeometry For(ChainKind kind, uint32_t slots, uint32_t lanes = 1);
  // Request n re-arms instance n - lag, lag = W + 1 (request n is sent once
  // reply n - W arrived, and R's tail of n - W may not have run by then;
  // that of n - W - 1 has).
  uint64_t rearm_lag() const { return uint64_t{lanes} + 1; }
  // Signaled L WQEs per instance (what C_w's last WAIT on lcq_w counts).
  uint32_t l_signaled() const;
};

// Unmapped Store's and Invalidate's L steps, by index in the instance (what
// the MN's repair reads: odrp.h "Empty queue", "Recovery").
inline constexpr uint32_t kStoreU1 = 2, kStoreU6 = 11, kStoreU4 = 7, kStoreChk = 8, kStoreU7 = 9,
                          kStoreU5 = 10;
inline constexpr uint32_t kInvV3 = 4, kInvV4 = 5, kInvV7 = 6, kInvV5 = 7, kInvV8 = 9;

// A CN's request headers: one per request in flight, this far apart.
// (Invalidate's header is 124 B; the reply word is the stride's last 8.)
inline constexpr uint64_t kHeaderStride = 256;

// The WAIT counts / ENABLE indices of the instance serving request m, in the
// order the request carries them (see RearmTargets in chains.cc). `lanes`:
// the chain's W.
std::vector<uint64_t> RearmValues(ChainKind kind, uint64_t m, uint32_t lanes = 1);
// The RQ doorbell record value request n writes.
uint32_t DoorbellValue(const ChainGeometry& g, uint64_t n);

// Request header (the SEND payload before the page, all BIG-ENDIAN):
//   Load:          tt_addr u64 | dst_addr u64 | dst_rkey u32 | seq u32 |
//                  re-arm u64 x 6 | doorbell u32                       (76 B)
//   UnmappedStore: tt_addr u64 | reply_addr u64 | reply_rkey u32 | seq u32 |
//                  re-arm u64 x 10 | doorbell u32, then the 4 KB page  (108 B)
//   MappedStore:   the same with re-arm u64 x 8, then the 4 KB page     (92 B)
//   Invalidate:    the same with re-arm u64 x 12, no page              (124 B)
//   (all but Load: the reply word is the header slot's last 8 bytes,
//   kHeaderStride - 8)
// seq = low 32 bits of n (the reply's imm).
uint32_t HeaderBytes(ChainKind kind);
// `rearm`: the re-arm values to send (default: RearmValues for request
// n - rearm_lag + slots, what an honest CN sends).
std::vector<uint8_t> EncodeHeader(const ChainGeometry& g, uint64_t n, uint64_t tt_addr,
                                  uint64_t dst_addr = 0, uint32_t dst_rkey = 0,
                                  const std::vector<uint64_t>* rearm = nullptr);

// One chain of one CN on the MN.
class Chain {
 public:
  // Creates R, L, C (L and C connected to themselves) and (registered here)
  // the scratch words (all but Load) and staging pages (stores). Connect
  // cn_qp() to the CN's ChainClient::qp(), then Arm.
  // `lanes`: W worker/control lanes behind the one R.
  static Task<std::unique_ptr<Chain>> Create(OdrpMetadata* mn, const CnTable* cn, ChainKind kind,
                                             uint32_t slots, uint32_t lanes = 1);
  // Pre-posts every instance and every RECV, and starts C's first instance
  // (the MN CPU posts them: verbs.post_send each). The only MN CPU work.
  Task<void> Arm();

  const ChainGeometry& geometry() const { return geo_; }
  fabric::Qp* cn_qp() const { return r_; }
  fabric::Qp* worker_qp() const { return l_; }   // lane 0's L_w
  fabric::Qp* control_qp() const { return c_; }  // lane 0's C_w
  fabric::Qp* lane_worker_qp(uint32_t w) const { return lane_l_.at(w); }
  fabric::Qp* lane_control_qp(uint32_t w) const { return lane_c_.at(w); }
  // Every MN QP of the chain (R, then L and C or every L_w and C_w).
  std::vector<fabric::Qp*> qps() const;
  uint64_t requests_taken() const { return r_->counters().recvs_consumed; }
  // A chain QP is in ERR: the chain serves nothing until rebuilt.
  bool Faulted() const;
  // Every request the chain took has sent its reply (R0 completed): nothing
  // of the chain is in flight.
  bool Idle() const;
  uint64_t staging_addr(uint32_t slot) const { return staging_ + slot * kPageBytes; }
  // Where request n's RECV puts its tt_addr (slot n % slots; Unmapped Store
  // and Invalidate). Attack tests write it as a late RECV would.
  uint64_t request_tt_addr(uint32_t slot) const { return ta_addr(slot); }

  // ---- Recovery (MN CPU, control path only) ----
  // Moves R and every L_w and C_w to ERR (those not there yet): the chain
  // runs nothing more.
  void Stop();
  // Unmapped Store, Invalidate: moves every C_w to ERR first, so that no
  // L_w step is enabled any more; the MN then waits for WorkersSettled
  // (every step an L_w started has completed) before Stop, so that the
  // steps LastInstance reports ran in full (odrp.h "Recovery").
  void StopControl();
  bool WorkersSettled() const;
  // What the chain holds on the MN: R and every L_w and C_w, their CQs, the
  // scratch and staging MRs and memory. For chain::Teardown once the chain
  // is stopped and replaced (OdrpMnSide::RebuildChain); nothing of the
  // chain may be used after.
  chain::ChainParts Parts() const;
  // The instance lane w's L_w started last: its slot and how many of its L
  // WQEs started (steps, 0: the lane never ran). L_w runs in order, so only
  // this instance of the lane can be partial; steps > kStoreU1 (say) means
  // U1 ran.
  struct LaneProgress {
    uint32_t slot = 0;
    uint32_t steps = 0;
  };
  LaneProgress LastInstance(uint32_t w) const;
  // Unmapped Store, Invalidate instance `slot`: the ring position its U1
  // (head) or V5 (tail) FAA claimed (faa[slot], host LE).
  uint64_t ClaimedPosition(uint32_t slot) const;
  // Unmapped Store: the element U4 read at that position (its landing in
  // U7's local address field, BE, returned as a value; 0: the free page
  // queue was empty).
  uint64_t DequeuedElement(uint32_t slot) const;
  // Invalidate: the page V3 read from the TT entry (its landing in V4's
  // remote address, BE, as a value).
  uint64_t InvalidatedPage(uint32_t slot) const;
  // Load, Mapped Store, after a fault (MN CPU, control path): the request
  // the chain refused (Load: its L1 faulted on the tt_addr, or the entry it
  // read is 0; Mapped Store: its M1 faulted on the tt_addr, or M2 on an
  // unmapped entry), or kNoRequest. The requests between the last
  // acknowledged reply and it may have lost their replies only because R
  // went to ERR with their R0s in flight (a QP's error flushes its
  // unacknowledged WRs): innocent.
  static constexpr uint64_t kNoRequest = ~uint64_t{0};
  uint64_t RefusedRequest() const;

 private:
  Chain() = default;
  enum Role : uint8_t { kL, kR, kC };
  fabric::Qp* qp(Role r) const { return r == kL ? l_ : r == kR ? r_ : c_; }
  // The QP of `r` that serves instance s (L and C: lane s mod W).
  fabric::Qp* qp(Role r, uint32_t s) const {
    return r == kR ? r_ : r == kL ? lane_l_[s % geo_.lanes] : lane_c_[s % geo_.lanes];
  }
  uint32_t wrs(Role r) const { return r == kL ? geo_.l_wrs : r == kR ? geo_.r_wrs : geo_.c_wrs; }
  uint64_t Wqe(Role r, uint64_t index) const { return qp(r)->SendWqeAddr(index); }
  // WQE `k` of instance s (L and C: in lane s mod W's ring, its (s / W)-th).
  uint64_t InstWqe(Role r, uint32_t s, uint32_t k) const {
    const uint64_t inst = r == kR ? s : s / geo_.lanes;
    return qp(r, s)->SendWqeAddr(inst * wrs(r) + k);
  }
  void CreateLanes();
  void BuildLoad(uint32_t s, std::vector<fabric::SendWr>* l, std::vector<fabric::SendWr>* r,
                 std::vector<fabric::SendWr>* c, fabric::RecvWr* rr) const;
  void BuildStore(uint32_t s, std::vector<fabric::SendWr>* l, std::vector<fabric::SendWr>* r,
                  std::vector<fabric::SendWr>* c, fabric::RecvWr* rr) const;
  void BuildMappedStore(uint32_t s, std::vector<fabric::SendWr>* l, std::vector<fabric::SendWr>* r,
                        std::vector<fabric::SendWr>* c, fabric::RecvWr* rr) const;
  void BuildInvalidate(uint32_t s, std::vector<fabric::SendWr>* l, std::vector<fabric::SendWr>* r,
                       std::vector<fabric::SendWr>* c, fabric::RecvWr* rr) const;
  // Instance s of this chain's kind, its lap-0 WAIT counts and ENABLE
  // indices set (the values a CN sends for later laps), by role.
  void BuildInstance(uint32_t s, std::vector<fabric::SendWr> (&wr)[3], fabric::RecvWr* rr) const;
  // Shared by the kinds ("Pipelining"): the lane's previous instance, its
  // ticket T, the notification source N, R0 + R1, the RECV's arguments,
  // C_w's gate, one plain L step.
  uint32_t PrevSlot(uint32_t s) const;
  fabric::SendWr TicketWr(uint32_t s, const fabric::Sge* second) const;
  fabric::SendWr NotifySourceWr(uint32_t s) const;
  void BuildReply(uint32_t s, std::vector<fabric::SendWr>* r) const;
  void SetArgs(uint32_t s, fabric::Sge tt, fabric::RecvWr* rr) const;
  void BuildGate(uint32_t s, std::vector<fabric::SendWr>* c) const;
  fabric::SendWr Step(uint32_t s, uint32_t id, fabric::Opcode op, uint64_t remote, uint32_t rkey,
                      fabric::Sge sge, uint8_t flags) const;
  uint64_t LoadWqeField(uint32_t slot, uint32_t step, uint64_t off) const;
  uint64_t faa_addr(uint32_t s) const { return scratch_ + 8ull * s; }
  uint64_t ta_addr(uint32_t s) const { return scratch_ + 8ull * (geo_.slots + s); }
  uint64_t chk_addr(uint32_t s) const { return scratch_ + 8ull * (2 * geo_.slots + s); }
  uint64_t snap_addr(uint32_t s) const { return scratch_ + 8ull * (3 * geo_.slots + s); }
  // All but Load: 16 zero bytes (T's source) and the BE word holding their
  // address (M3's source: what R0 sends from).
  uint64_t zeros_addr() const { return scratch_ + 32ull * geo_.slots; }
  uint64_t notify_src_addr() const { return zeros_addr() + 16; }

  OdrpMetadata* mn_ = nullptr;
  const CnTable* cn_ = nullptr;
  ChainGeometry geo_;
  fabric::Cq* rcq_ = nullptr;
  fabric::Cq* rscq_ = nullptr;
  fabric::Cq* lcq_ = nullptr;
  fabric::Qp* r_ = nullptr;
  fabric::Qp* l_ = nullptr;
  fabric::Qp* c_ = nullptr;
  std::vector<fabric::Qp*> lane_l_;  // L_w
  std::vector<fabric::Qp*> lane_c_;  // C_w
  std::vector<fabric::Cq*> lane_lcq_;
  fabric::Cq* gcq_ = nullptr;  // C_w's signaled ENABLEs of R (the gate)
  uint64_t scratch_ = 0;       // non-Load: faa[], ta[], chk[], snap[], zeros, notify word
  uint64_t staging_ = 0;       // stores: staging[s] at staging_ + 4096 s
  fabric::Mr* scratch_mr_ = nullptr;
  fabric::Mr* staging_mr_ = nullptr;
  std::vector<uint32_t> l_signaled_before_;  // signaled L WQEs before index k of an instance
  bool armed_ = false;
};

// The CN end of one chain. Up to geometry().lanes requests in flight (the
// re-arm lag relies on it: request n is sent only after reply n - lanes
// arrived); requests are numbered 0, 1, ... by the client, and replies come
// back in that order.
class ChainClient {
 public:
  // `hdr_mr` covers one header per request in flight: Load [hdr_addr,
  // + (lanes - 1) x kHeaderStride + HeaderBytes), local access is enough;
  // the other kinds [hdr_addr, + lanes x kHeaderStride) with remote write
  // (the MN writes the reply word, the last 8 bytes of each stride).
  // Otherwise std::invalid_argument.
  // Creates the CN's QP (not connected; access: remote write, for the reply).
  ChainClient(fabric::Node* cn, fabric::Pd* pd, fabric::Runtime* rt, ChainGeometry geo,
              fabric::Mr* hdr_mr, uint64_t hdr_addr);
  // Destroys the QP and its CQs (the header MR is the caller's).
  ~ChainClient();
  ChainClient(const ChainClient&) = delete;
  ChainClient& operator=(const ChainClient&) = delete;

  fabric::Qp* qp() const { return qp_; }
  // No request is inside the client (in flight or waiting for the window):
  // it may be destroyed.
  bool Idle() const { return in_flight_ == 0 && window_.size() == 0; }
  const ChainGeometry& geometry() const { return geo_; }
  uint64_t requests_sent() const { return next_; }
  uint32_t in_flight() const { return in_flight_; }
  // The number of the request that just returned (Chain::kNoRequest: it was
  // never sent). Read it as timed_out().
  uint64_t last_request() const { return last_request_; }
  // The most requests that were ever in flight at once (tests).
  uint32_t max_in_flight() const { return max_in_flight_; }
  // The request that just returned ended at its reply deadline (no reply:
  // the MN's chain refused it, or was slower than `timeout` and no liveness
  // check said so). Read it right after the call returns (no co_await in
  // between): several requests may be in flight. A request flushed behind
  // one that timed out did not time out.
  bool timed_out() const { return timed_out_; }
  // Asked when a reply deadline passes (control path, e.g. the MN CPU reading
  // the chain's QP states): true = the chain has not faulted, the request is
  // only slow: wait another `timeout`. Without it the CN gives up at once.
  using LivenessCheck = chain::LivenessCheck;
  void SetLivenessCheck(LivenessCheck check) { deadlines_.set_liveness(std::move(check)); }
  // Attack tests: a malicious CN's edit of the re-arm values request `n`
  // carries (those of the instance serving request n - lag + slots, in
  // RearmValues order).
  using Tamper = std::function<void(uint64_t n, std::vector<uint64_t>* values)>;
  void set_tamper(Tamper t) { tamper_ = std::move(t); }

  // Load chain: the page behind tt_addr lands in [dst_addr, +4 KB), which
  // `dst_rkey` must allow the MN to write.
  Task<Status> Load(uint64_t tt_addr, uint64_t dst_addr, uint32_t dst_rkey, Ps timeout);
  // Unmapped Store chain: allocates a page, maps it at tt_addr and stores
  // [src_addr, +4 KB) (covered by src_lkey) in it.
  Task<Status> UnmappedStore(uint64_t tt_addr, uint64_t src_addr, uint32_t src_lkey, Ps timeout);
  // Mapped Store chain: stores [src_addr, +4 KB) in the page already mapped
  // at tt_addr (an unmapped entry faults the chain: no reply).
  Task<Status> MappedStore(uint64_t tt_addr, uint64_t src_addr, uint32_t src_lkey, Ps timeout);
  // Invalidate chain: returns the page mapped at tt_addr to the free page
  // queue and zeroes the entry (an unmapped entry faults the chain, changing
  // nothing: no reply).
  Task<Status> Invalidate(uint64_t tt_addr, Ps timeout);

 private:
  // Waits for a free place in the window (W in flight), writes request next_'s
  // header into its buffer, posts the RECV for the reply and the SEND,
  // awaits the reply.
  Task<Status> Invoke(uint64_t tt_addr, uint64_t dst_addr, uint32_t dst_rkey,
                      const fabric::Sge* page, uint32_t expect_bytes, Ps timeout);
  Status ReplyStatus(const fabric::WorkCompletion& wc, uint64_t n, uint32_t expect_bytes,
                     Ps timeout, bool timed_out) const;
  // The header of request next_ (re-arm values edited by tamper_, if set).
  std::vector<uint8_t> Header(uint64_t tt_addr, uint64_t dst_addr = 0, uint32_t dst_rkey = 0) const;
  // Writes the header of request next_ and sends it (and the page, if any).
  Task<Status> SendHeader(ChainKind kind, uint64_t tt_addr, uint64_t src_addr, uint32_t src_lkey,
                          Ps timeout);

  fabric::Node* cn_;
  ChainGeometry geo_;
  fabric::Mr* hdr_mr_;
  uint64_t hdr_;
  fabric::Cq* send_cq_ = nullptr;
  fabric::Cq* recv_cq_ = nullptr;
  fabric::Qp* qp_ = nullptr;
  uint64_t next_ = 0;
  uint32_t in_flight_ = 0;
  uint64_t last_request_ = ~uint64_t{0};
  uint32_t max_in_flight_ = 0;
  WaitList window_;  // requests waiting for one of the W in flight to return
  bool timed_out_ = false;
  chain::ReplyDeadlines deadlines_;
  Tamper tamper_;
};

// The CN's frontswap-style backend ([ODRP] §4.4): computes tt_addr from the
// swap address and keeps the bitmap of mapped swap pages that picks the store
// chain (unmapped -> Unmapped Store, mapped -> Mapped Store). `load` and
// `unmapped_store` must not be null; a null `mapped_store` or `invalidate`
// makes the operations that need it kUnsupported.
class SwapClient {
 public:
  SwapClient(ChainClient* load, ChainClient* unmapped_store, uint64_t tt_base, uint64_t swap_pages,
             ChainClient* mapped_store = nullptr, ChainClient* invalidate = nullptr);
  bool mapped(uint64_t swap_addr) const;
  Task<Status> Store(uint64_t swap_addr, uint64_t src_addr, uint32_t src_lkey, Ps timeout);
  Task<Status> Load(uint64_t swap_addr, uint64_t dst_addr, uint32_t dst_rkey, Ps timeout);
  // Releases the page behind a mapped swap page (frontswap invalidate_page).
  Task<Status> Invalidate(uint64_t swap_addr, Ps timeout);

 private:
  Status CheckAddr(uint64_t swap_addr) const;
  ChainClient* load_;
  ChainClient* ustore_;
  ChainClient* mstore_;
  ChainClient* inval_;
  uint64_t tt_base_;
  std::vector<bool> mapped_;
};

}  // namespace dmb::systems::odrp
