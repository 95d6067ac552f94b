/**
 * Seat keys (RULES 9.3): a seat that registered an Ed25519 public key (`seat_key`)
 * signs every command it sends. `sig` is the standard base64 of the signature, by the
 * seat's key, of the canonical JSON (sorted keys, no spaces, ASCII) of
 * `{"room": ROOM, "seat": FACTION, "command": COMMAND}`, COMMAND without `sig` and with
 * a `command_id` the seat has not used before in the room. WebCrypto, as the seat page
 * uses it: in Node 20 and in current browsers (a secure context).
 */

/** A seat's key pair: the private key (not extractable) and the public key as
 * `seat_key` wants it (standard base64 of the raw 32 bytes). */
export interface SeatKey {
  privateKey: CryptoKey;
  publicKey: string;
}

export async function newSeatKey(): Promise<SeatKey> {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
  if (!("privateKey" in pair)) {
    throw new Error("WebCrypto made no Ed25519 key pair");
  }
  const raw = await crypto.subtle.exportKey("raw", pair.publicKey);
  return { privateKey: pair.privateKey, publicKey: base64(new Uint8Array(raw)) };
}

/** `command` with its `sig` for `seat` of `room`. */
export async function sign<C extends { command_id?: string | null }>(
  key: CryptoKey,
  room: string,
  seat: string,
  command: C,
): Promise<C & { sig: string }> {
  const signed = new TextEncoder().encode(canonical({ room, seat, command }));
  const signature = await crypto.subtle.sign({ name: "Ed25519" }, key, signed);
  return { ...command, sig: base64(new Uint8Array(signature)) };
}

/** JSON with sorted keys, no spaces and every character outside printable ASCII
 * escaped: what Python's `json.dumps(value, sort_keys=True, separators=(",", ":"))`
 * writes (for the integers, strings, booleans and nulls of a command). */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonical).join(",")}]`;
  }
  if (typeof value === "object" && value !== null) {
    const fields = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${fields.map(([k, v]) => `${ascii(JSON.stringify(k))}:${canonical(v)}`).join(",")}}`;
  }
  return ascii(JSON.stringify(value));
}

function ascii(json: string): string {
  return json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function base64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}
