/**
 * GET /rooms/{room}/stream as an async iterable of views: each `event: view` frame's
 * JSON with its version (the frame's `id:`). When the connection drops (a restart, a
 * proxy's timeout) it reconnects by itself with `Last-Event-ID`, so the server sends
 * only the views after the last one received: none is repeated, and the first after
 * a reconnection is the room's current view (intermediate versions may be skipped:
 * each frame is the whole view).
 */
import { EventSourceParserStream } from "eventsource-parser/stream";

import type { components } from "./schema.js";

/** A frame's view: the seat's (SeatView) for a seat token, the public view for the
 * spectator's, or a view the projection guard withheld. */
export type Frame = { version: number; view: components["schemas"]["Frame"] };

export interface FollowOptions {
  /** The version last received: the stream starts after it (the server's Last-Event-ID). */
  after?: number;
  /** Stops the stream. */
  signal?: AbortSignal;
  /** Milliseconds to wait before reconnecting when the server gave no Retry-After (1000). */
  retry?: number;
}

/** An answer that no reconnection changes (a wrong token: 401, an unknown room: 404). */
export class StreamRefused extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export async function* follow(
  baseUrl: string,
  room: string,
  token: string,
  options: FollowOptions = {},
): AsyncGenerator<Frame> {
  const url = new URL(`rooms/${encodeURIComponent(room)}/stream`, withSlash(baseUrl));
  const { signal } = options;
  let after = options.after;
  while (!stopped(signal)) {
    let wait = options.retry ?? 1000;
    try {
      const response = await fetch(url, {
        headers: {
          Authorization: `Bearer ${token}`,
          Accept: "text/event-stream",
          ...(after === undefined ? {} : { "Last-Event-ID": String(after) }),
        },
        signal,
      });
      if (response.status === 429 || response.status >= 500) {
        wait = 1000 * Number(response.headers.get("retry-after") ?? wait / 1000);
        await response.body?.cancel();
      } else if (!response.ok || response.body === null) {
        const failure: unknown = await response.json().catch(() => null);
        throw refused(response.status, failure);
      } else {
        const frames = response.body
          .pipeThrough(new TextDecoderStream())
          .pipeThrough(new EventSourceParserStream());
        for await (const frame of frames) {
          if (frame.event === "view" && frame.id !== undefined) {
            after = Number(frame.id);
            yield { version: after, view: JSON.parse(frame.data) };
          }
        }
      }
    } catch (e) {
      if (e instanceof StreamRefused) throw e;
      if (stopped(signal)) return;
      // The connection dropped or could not be made: try again from `after`.
    }
    await sleep(wait, signal);
  }
}

function refused(status: number, failure: unknown): StreamRefused {
  const error =
    typeof failure === "object" && failure !== null && "error" in failure ? failure.error : null;
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : "";
  const message = typeof error === "object" && error !== null && "message" in error ? String(error.message) : "";
  return new StreamRefused(status, code, `the stream was refused (${status} ${code}): ${message}`);
}

function stopped(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

function withSlash(baseUrl: string): string {
  return baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
