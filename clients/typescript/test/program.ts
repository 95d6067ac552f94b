// What a game site's developer writes against the package: create a room from a layout,
// run a Box search, follow the seat's view across a disconnect, read a refusal, and end
// the room as its operator.
// Compiled with `tsc --strict` and run with Node against a live `dune-ledger serve`
// by tests/test_clients.py: it prints RESTART, waits for a line on stdin while the
// server restarts, and prints its findings as one JSON line.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";

import {
  createRoom, newSeatKey, Operator, Seat, sign, Unreachable, type Answer, type Layout, type SeatCommand,
} from "../src/index.js";

const [baseUrl = "", layoutFile = ""] = process.argv.slice(2);
const layout: Layout = JSON.parse(readFileSync(layoutFile, "utf8"));
const room = await createRoom(baseUrl, layout);
const richese = new Seat(baseUrl, room.room, room.seats["richese"] ?? "");

const before = await richese.view();
const begin = before.actions.find((a) => a.type === "begin_search");
if (begin === undefined) throw new Error("no Box search on offer");
const paid = await richese.send({ type: "begin_search", card: begin.card, command_id: "search-1" });
if (!paid.ok) throw new Error(`the search was refused: ${paid.error.code}`);

const views = richese.views({ retry: 200 });
const first = await views.next();
if (first.done === true) throw new Error("the stream ended");
const open = first.value;
const candidates = open.nullentropy?.search?.cards ?? [];
const pick = open.actions.find((a) => a.type === "select_card");
if (pick === undefined) throw new Error("no candidate to take");

console.log("RESTART");
const lines = createInterface({ input: process.stdin });
await lines[Symbol.asyncIterator]().next(); // the server is back

const take: SeatCommand = { type: "select_card", search: pick.search, card: pick.card, command_id: "take-1" };
const taken = await sendUntilAnswered(take);
const next = await views.next();
if (next.done === true) throw new Error("the stream ended");
const after = next.value;
await views.return(undefined);

const again = await richese.send({ type: "select_card", search: pick.search, card: pick.card, command_id: "take-2" });
const refusal = again.ok ? null : again.error.code;

const key = await newSeatKey();
const signed = [
  await sign(key.privateKey, room.room, "richese", { type: "draw", command_id: "draw-1" }),
  await sign(key.privateKey, room.room, "richese", {
    type: "ask_truthtrance", card: "truthtrance", target: "emperor",
    question: '¿Dónde está la especia? 🐛 "quoted"\n\u007f', command_id: "ask-1",
  }),
];

// The loopback server has no operator token: its operator routes are open there.
const end = await new Operator(baseUrl).send(room.room, { type: "end_room", command_id: "end-1" });
const ended = end.ok ? end.events.map((e) => (e.type === "RoomEnded" ? e.secret : null)) : [end.error.code];

console.log(JSON.stringify({
  room: room.room,
  opened: open.version,
  search: open.nullentropy?.search?.event ?? null,
  candidates: candidates.map((card) => card.id),
  taken: { ok: taken.ok, version: taken.version, events: taken.ok ? taken.events.map((e) => e.type) : [] },
  resumed: after.version,
  hand: after.me.hand.map((card) => card.id),
  refusal,
  ended,
  signed: { public_key: key.publicKey, commands: signed },
}));
process.exit(0);

async function sendUntilAnswered(command: SeatCommand): Promise<Answer> {
  for (let tries = 0; ; tries++) {
    try {
      return await richese.send(command);
    } catch (e) {
      // The server is still starting: the same command_id makes a retry safe.
      if (!(e instanceof TypeError || e instanceof Unreachable) || tries > 100) throw e;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
