/**
 * A typed client for dune-ledger's HTTP API: the types openapi-typescript makes of its
 * OpenAPI (./schema.ts, generated), a thin wrapper over openapi-fetch, a stream that
 * resumes with Last-Event-ID, and the seat-key signing of RULES 9.3.
 */
import createClient, { type Client } from "openapi-fetch";

import type { components, paths } from "./schema.js";
import { follow, type FollowOptions } from "./stream.js";

export type { components, paths } from "./schema.js";
export { canonical, newSeatKey, sign, type SeatKey } from "./sign.js";
export { follow, StreamRefused, type Frame, type FollowOptions } from "./stream.js";

type Schemas = components["schemas"];
export type Layout = Schemas["Layout"];
/** What POST /rooms/{room}/commands takes: a seat's command or the operator's. */
export type Command = Schemas["Command"];
export type SeatCommand = Schemas["SeatCommand"];
export type OperatorCommand = Schemas["OperatorCommand"];
export type CommandResult = Schemas["CommandResult"];
export type Failure = Schemas["Failure"];
/** A command's answer: narrowed by `ok`. */
export type Answer = CommandResult | Failure;
export type SeatView = Schemas["SeatView"];
export type PublicView = Schemas["PublicView"];
export type WithheldView = Schemas["WithheldView"];
export type Action = Schemas["Action"];
export type PublicEvent = Schemas["PublicEvent"];
export type LogEntry = Schemas["LogEntry"];
export type CreatedRoom = Schemas["CreatedRoom"];

/** openapi-fetch's client for the whole API, sending `token` (a seat's, the spectator's
 * or the operator's) as its bearer token. */
export function connect(baseUrl: string, token?: string): Client<paths> {
  return createClient<paths>({
    baseUrl,
    headers: token === undefined ? {} : { Authorization: `Bearer ${token}` },
  });
}

/** An answer that is not the result shape: the server could not be reached. */
export class Unreachable extends Error {}

/** A view the projection guard withheld: it would have shown a hidden card. */
export class Withheld extends Error {}

/** An error answer of a read or of room creation, in the result shape. */
export class Refused extends Error {
  constructor(readonly failure: Failure) {
    super(`${failure.error.code}: ${failure.error.message}`);
  }
}

/** Creates a room from a layout; `operator` is DUNE_LEDGER_ADMIN_TOKEN where one is set. */
export async function createRoom(baseUrl: string, layout: Layout, operator?: string): Promise<CreatedRoom> {
  const { data, error } = await connect(baseUrl, operator).POST("/rooms", { body: layout });
  if (error !== undefined) throw new Refused(error);
  return data ?? unreachable();
}

/** One seat of one room, by its token: its commands, its view and its stream. */
export class Seat {
  readonly api: Client<paths>;

  constructor(
    readonly baseUrl: string,
    readonly room: string,
    readonly token: string,
  ) {
    this.api = connect(baseUrl, token);
  }

  /** Sends a command as this seat; send it with a `command_id` to retry it safely. */
  async send(command: SeatCommand): Promise<Answer> {
    return sendCommand(this.api, this.room, command);
  }

  /** The seat's view now. */
  async view(): Promise<SeatView> {
    const { data, error } = await this.api.GET("/rooms/{room}/view", {
      params: { path: { room: this.room } },
    });
    if (error !== undefined) throw new Refused(error);
    if (data === undefined) return unreachable();
    if ("withheld" in data) {
      throw new Withheld(data.withheld);
    }
    return data;
  }

  /** The seat's views as they change, resuming after a disconnect (see `follow`). */
  async *views(options: FollowOptions = {}): AsyncGenerator<SeatView> {
    for await (const frame of follow(this.baseUrl, this.room, this.token, options)) {
      if ("me" in frame.view) {
        yield frame.view;
      }
    }
  }
}

/** The operator of a server: its own commands to a room (`end_room`, ...), with
 * DUNE_LEDGER_ADMIN_TOKEN where one is set (none on a loopback server without one). */
export class Operator {
  readonly api: Client<paths>;

  constructor(
    readonly baseUrl: string,
    token?: string,
  ) {
    this.api = connect(baseUrl, token);
  }

  /** Sends one of the operator's commands to `room`. */
  async send(room: string, command: OperatorCommand): Promise<Answer> {
    return sendCommand(this.api, room, command);
  }
}

async function sendCommand(api: Client<paths>, room: string, command: Command): Promise<Answer> {
  const { data, error } = await api.POST("/rooms/{room}/commands", {
    params: { path: { room } },
    body: command,
  });
  return data ?? error ?? unreachable();
}

function unreachable(): never {
  throw new Unreachable("the server gave no answer in the result shape");
}
