// Fair dealing in the player's own browser (RULES 9): the seat's Ed25519 key and its
// seed, kept in IndexedDB for one room and seat; the signature of a command (9.3); and
// the check of an ended room's transcript (9.8), with WebCrypto only. Loaded before the
// seat page's script, it defines `window.duneFairness`. It decides no rule: it holds
// the key and checks what the server recorded.
window.duneFairness = (() => {
  'use strict';

  const V2 = 'hmac-sha256-fy-v2';
  const text = new TextEncoder();

  // WebCrypto exists only in a secure context (HTTPS, or this computer's own address):
  // null when the page can hold a key here, else why it cannot.
  function unable() {
    if (!window.isSecureContext || !window.crypto || !crypto.subtle) {
      return 'This page is not in a secure context (HTTPS, or an address on this computer), '
        + 'so the browser gives it no cryptography: it cannot make or hold a seat key here, '
        + 'and nothing protects this seat against commands sent in its name. Ask the host '
        + 'for an https:// address.';
    }
    if (!window.indexedDB) {
      return 'This browser keeps no storage for this page here (a private window may not): '
        + 'the page cannot keep a seat key.';
    }
    return null;
  }

  const hex = (bytes) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
  const unhex = (s) => new Uint8Array(s.match(/../g).map((b) => parseInt(b, 16)));
  const b64 = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes)));
  const unb64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  const sha256 = async (s) => hex(await crypto.subtle.digest('SHA-256', typeof s === 'string' ? text.encode(s) : s));

  // Canonical JSON as the server writes it (Python's json.dumps with sorted keys, no
  // spaces, ASCII): every character outside space to tilde written as \uXXXX.
  const ascii = (s) => s.replace(/[^ -~]/g, (c) => {
    const plain = JSON.stringify(c);
    return plain.length === 4 ? plain.slice(1, 3) // \n, \t, \" ... as JSON.stringify writes them
      : '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
  });
  function canonical(value) {
    if (Array.isArray(value)) return '[' + value.map(canonical).join(',') + ']';
    if (value !== null && typeof value === 'object') {
      return '{' + Object.keys(value).sort().map((k) => ascii(JSON.stringify(k)) + ':'
        + canonical(value[k])).join(',') + '}';
    }
    return ascii(JSON.stringify(value));
  }

  // What a seat signs (RULES 9.3): the command without its `sig`.
  function signedText(room, seat, command) {
    const { sig, ...bare } = command;
    return text.encode(canonical({ room, seat, command: bare }));
  }

  // --- the seat's key and seed, kept in this browser -------------------------------

  function database() {
    return new Promise((done, fail) => {
      const opening = indexedDB.open('dune-ledger-fairness', 1);
      opening.onupgradeneeded = () => opening.result.createObjectStore('seats', { keyPath: 'id' });
      opening.onsuccess = () => done(opening.result);
      opening.onerror = () => fail(opening.error);
    });
  }

  async function stored(mode, act) {
    const db = await database();
    try {
      return await new Promise((done, fail) => {
        const tx = db.transaction('seats', mode);
        const asked = act(tx.objectStore('seats'));
        tx.oncomplete = () => done(asked.result);
        tx.onerror = () => fail(tx.error);
      });
    } finally {
      db.close();
    }
  }

  const read = (id) => stored('readonly', (s) => s.get(id));
  const keep = (record) => stored('readwrite', (s) => s.put(record));
  const first = (record) => stored('readwrite', (s) => s.add(record)); // fails if one is there

  // This browser's record for the seat: its key pair (the private key not extractable,
  // kept as a CryptoKey, which IndexedDB stores as it is), the public key as `seat_key`
  // wants it, the room's commitment as first seen, and later the seed and its hash.
  async function holding(room, seat, commitment) {
    const id = `${room}:${seat}`;
    const found = await read(id);
    if (found) return found;
    const pair = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
    const record = { id, room, seat, pair, public_key: b64(await crypto.subtle.exportKey('raw', pair.publicKey)),
      commitment, seed: null, hash: null, reveal_sent: false, made: new Date().toISOString() };
    try {
      await first(record);
    } catch (e) {
      return read(id); // another tab of this seat made its key first: one key per seat
    }
    return record;
  }

  // A seed of 32 hex characters from crypto.getRandomValues, and its commitment (9.4),
  // kept before the commitment is sent, so that a reload still reveals it. Kept in one
  // transaction with the read: a seed another tab of the seat kept first is the seed.
  async function seeded(record) {
    if (record.seed) return record;
    const value = hex(crypto.getRandomValues(new Uint8Array(16)));
    const hash = await sha256(`dune-ledger:seed:${record.room}:${record.seat}:${value}`);
    const db = await database();
    try {
      return await new Promise((done, fail) => {
        const tx = db.transaction('seats', 'readwrite');
        const seats = tx.objectStore('seats');
        let result = null;
        const asked = seats.get(record.id);
        asked.onsuccess = () => {
          const now = asked.result || record;
          result = now.seed ? now : { ...now, seed: value, hash };
          if (result.seed === value) seats.put(result);
        };
        tx.oncomplete = () => done(result);
        tx.onerror = () => fail(tx.error);
      });
    } finally {
      db.close();
    }
  }

  // The id of every command this browser signed and the server accepted, a record each
  // (apart from the seat's record, which a tab writes whole): the check finds each in the
  // transcript, so a server that drops a command after accepting it is caught.
  const acceptedPrefix = (room, seat) => `${room}:${seat}:accepted:`;
  const accepted = (record, commandId) => keep({
    id: acceptedPrefix(record.room, record.seat) + commandId, command_id: commandId });
  async function acceptedIds(room, seat) {
    const low = acceptedPrefix(room, seat);
    const rows = await stored('readonly', (s) => s.getAll(IDBKeyRange.bound(low, `${low}\uffff`)));
    return rows.map((row) => row.command_id);
  }

  async function sign(record, command) {
    const signature = await crypto.subtle.sign({ name: 'Ed25519' }, record.pair.privateKey,
      signedText(record.room, record.seat, command));
    return { ...command, sig: b64(signature) };
  }

  // A key's short fingerprint: the first 16 hex of the sha256 of its 32 bytes.
  const fingerprint = async (publicKey) => (await sha256(unb64(publicKey))).slice(0, 16).match(/..../g).join(' ');

  // --- the in-browser check of a transcript (RULES 9.8) -------------------------------

  // The n-th random call's words (RULES 9.5): HMAC-SHA256(secret, "room:n:mix:block"),
  // each 32-byte block eight big-endian unsigned 32-bit words.
  function words(key, room, n, mix) {
    let block = 0;
    let buffer = [];
    return async () => {
      if (!buffer.length) {
        const digest = new DataView(await crypto.subtle.sign('HMAC', key, text.encode(`${room}:${n}:${mix}:${block}`)));
        block += 1;
        buffer = Array.from({ length: 8 }, (_, i) => digest.getUint32(i * 4, false));
      }
      return buffer.shift();
    };
  }

  async function uniform(next, k) {
    const limit = Math.floor(2 ** 32 / k) * k;
    for (;;) {
      const w = await next();
      if (w < limit) return w % k;
    }
  }

  async function shuffle(next, ids) {
    const out = [...ids];
    for (let i = out.length - 1; i >= 1; i -= 1) {
      const j = await uniform(next, i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  // Where an event keeps the outcome of its random call: a whole shuffle, or a sample
  // (the first k of one).
  const OUTCOMES = { order: 'shuffle', cohort: 'sample' };

  class Failed extends Error {
    constructor(check, detail) {
      super(detail);
      this.check = check;
    }
  }

  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const must = (check, holds, detail) => { if (!holds) throw new Failed(check, detail); };

  // The transcript's lines, each with its payload read: any line that does not read is
  // the first failure.
  function parse(body) {
    const lines = body.split('\n').filter((l) => l.trim());
    return lines.map((line, i) => {
      try {
        const row = JSON.parse(line);
        const payload = JSON.parse(row.payload);
        if (!payload || typeof payload.fact !== 'object' || payload.fact === null) throw new Error('no fact');
        return { ...row, body: payload, fact: payload.fact, meta: payload.meta || {} };
      } catch (e) {
        throw new Failed('transcript', `line ${i + 1} is not an event of the export's format`);
      }
    });
  }

  // Every check the page makes, in order; each says what it checked. `me` is this
  // browser's record for the seat, `serverKey` the server's public key (GET /keys).
  const CHECKS = [
    ['transcript', 'The transcript is one chain: each event\'s hash and predecessor, each append signed by the server'],
    ['commitment', 'The published secret hashes to the commitment this page saw when it first opened'],
    ['my_key', 'The key recorded for this seat is the one this browser holds'],
    ['my_commitment', 'The commitment recorded for this seat is this browser\'s'],
    ['my_reveal', 'The seed revealed for this seat is this browser\'s, and the deal used it'],
    ['my_commands', 'Every command in this seat\'s name since its key is signed by this browser\'s key, and every command this browser saw accepted is in the transcript'],
    ['ceremony', 'Every reveal matches its commitment, the mix is the mix of the seeds, the withheld seats are exactly those that did not reveal, one deal before any outcome'],
    ['derivations', 'Every random outcome is the derivation (HMAC-SHA256 and a Fisher-Yates shuffle) of the list it shuffled, with the room\'s counter running 0, 1, 2, … without a gap'],
  ];

  async function check(body, { room, seat, me, serverKey, accepted = [] }) {
    const done = {};
    const say = (name, detail) => { done[name] = detail; };
    try {
      const undealt = await run(parse(body), { room, seat, me, serverKey, accepted }, say) === 'undealt';
      return { ok: true, done, failed: null, undealt };
    } catch (e) {
      const failed = e instanceof Failed ? { check: e.check, detail: e.message }
        : { check: 'transcript', detail: `the check stopped: ${e.message}` };
      return { ok: false, done, failed };
    }
  }

  async function run(events, { room, seat, me, serverKey, accepted }, say) {
    // transcript: the chain, and the server's signature on each append.
    must('transcript', events.length > 0, 'the transcript is empty');
    const verifier = await crypto.subtle.importKey('raw', unb64(serverKey), { name: 'Ed25519' }, false, ['verify']);
    let prev = '0'.repeat(64);
    let appends = 0;
    for (const [i, e] of events.entries()) {
      must('transcript', e.room === room, `version ${e.version} is of another room`);
      must('transcript', e.version === i + 1, `version ${e.version} stands where ${i + 1} should`);
      must('transcript', e.prev === prev && e.body.prev === prev, `version ${e.version}: its predecessor is not the event before it`);
      must('transcript', await sha256(`${room}:${e.version}:${e.type}\n${e.payload}`) === e.hash,
        `version ${e.version}: its hash is not the hash of its payload`);
      const last = i + 1 === events.length || events[i + 1].body.append !== e.body.append;
      if (last) {
        appends += 1;
        must('transcript', typeof e.sig === 'string' && await crypto.subtle.verify({ name: 'Ed25519' }, verifier,
          unb64(e.sig), text.encode('dune-ledger:append:' + e.hash)), `the append ending at version ${e.version} is not signed by the server's key`);
      }
      prev = e.hash;
    }
    say('transcript', `${events.length} events in ${appends} appends`);

    const created = events[0];
    must('transcript', created.type === 'RoomCreated', 'the first event is not the room\'s creation');
    const ended = events.find((e) => e.type === 'RoomEnded');
    must('commitment', ended && typeof ended.fact.secret === 'string' && /^[0-9a-f]{64}$/.test(ended.fact.secret),
      'the transcript publishes no secret');
    const fair = (created.fact.state && created.fact.state.fairness) || {};
    must('commitment', fair.algorithm === V2, `the room is not dealt under ${V2}`);
    must('commitment', fair.commitment === me.commitment, 'the room\'s commitment is not the one this page saw at first');
    const secret = unhex(ended.fact.secret);
    const prefixed = new Uint8Array([...text.encode('dune-ledger:commit:'), ...secret]);
    must('commitment', await sha256(prefixed) === fair.commitment, 'the published secret does not hash to the commitment');
    say('commitment', `sha256 of the secret is ${fair.commitment.slice(0, 16)}…`);

    const by = (type, who) => events.filter((e) => e.type === type && (who === undefined || e.fact.seat === who));
    // my_key: every key registered for this seat is this browser's.
    const keys = by('SeatKeyRegistered', seat);
    must('my_key', keys.length > 0, 'no key is recorded for this seat');
    for (const k of keys) {
      must('my_key', k.fact.public_key === me.public_key, `version ${k.version} records another key for this seat`);
    }
    const cleared = events.filter((e) => e.type === 'SeatTokenReissued' && e.fact.seat === seat && e.fact.key_cleared);
    say('my_key', cleared.length ? `this browser's key; the host cleared it ${cleared.length} time(s) with a new token`
      : 'this browser\'s key, never cleared');

    // my_commitment and my_reveal.
    const dealt = by('Dealt');
    if (!dealt.length && !events.some((e) => e.fact.rng)) return 'undealt'; // ended before its deal
    must('ceremony', dealt.length === 1, `the room was dealt ${dealt.length} times, not once`);
    const deal = dealt[0];
    const commits = by('SeedCommitted', seat).filter((e) => e.version < deal.version);
    must('my_commitment', commits.length > 0 && commits[commits.length - 1].fact.hash === me.hash,
      'the commitment recorded for this seat is not the one this browser sent');
    say('my_commitment', me.hash.slice(0, 16) + '…');
    must('my_reveal', !(deal.fact.withheld || []).includes(seat),
      me.reveal_sent ? 'this page sent its reveal, and the deal recorded it as withheld: the server dealt without it'
        : 'this seat\'s reveal is recorded as withheld');
    const reveals = by('SeedRevealed', seat);
    must('my_reveal', reveals.length === 1 && reveals[0].fact.value === me.seed && deal.fact.seeds[seat] === me.seed,
      'the seed recorded for this seat is not this browser\'s');
    say('my_reveal', 'revealed and dealt');

    // my_commands: from its key on, each command in this seat's name verifies under it.
    const mine = await crypto.subtle.importKey('raw', unb64(me.public_key), { name: 'Ed25519' }, false, ['verify']);
    let signed = 0;
    let autopilot = 0;
    const firstKey = keys[0].version;
    for (const e of events) {
      if (e.version <= firstKey || e.body.append !== e.version || e.body.seat !== seat) continue;
      const who = e.meta.by;
      if (who === 'autopilot') { autopilot += 1; continue; }
      must('my_commands', who === 'seat', `the append at version ${e.version} in this seat's name records no sender`);
      const command = e.meta.command;
      must('my_commands', command && typeof command.sig === 'string', `the command at version ${e.version} carries no signature`);
      must('my_commands', await crypto.subtle.verify({ name: 'Ed25519' }, mine, unb64(command.sig),
        signedText(room, seat, command)), `the command at version ${e.version} is not signed by this browser's key`);
      signed += 1;
    }
    // What this browser sent and saw accepted is recorded: a signature binds a command,
    // not its place, so the server could otherwise drop one and make the rest again.
    const recorded = new Set(events.filter((e) => e.body.append === e.version && e.body.seat === seat
      && e.meta.command).map((e) => e.meta.command.command_id));
    const lost = accepted.filter((id) => !recorded.has(id));
    must('my_commands', !lost.length, lost.length === 1
      ? 'a command this browser sent and the server accepted is not in the transcript'
      : `${lost.length} commands this browser sent and the server accepted are not in the transcript`);
    say('my_commands', `${signed} signed by this browser` + (autopilot ? `, ${autopilot} by the autopilot` : '')
      + `; the ${accepted.length} it saw accepted are all recorded`);

    // ceremony: every reveal against its seat's last commitment, the mix, the withheld.
    const commitments = {};
    for (const e of by('SeedCommitted').filter((x) => x.version < deal.version)) commitments[e.fact.seat] = e.fact.hash;
    const revealed = {};
    for (const e of by('SeedRevealed')) {
      const hashed = await sha256(`dune-ledger:seed:${room}:${e.fact.seat}:${e.fact.value}`);
      must('ceremony', e.version <= deal.version, `a seed was revealed after the deal (version ${e.version})`);
      must('ceremony', hashed === commitments[e.fact.seat], `${e.fact.seat}'s reveal does not match its commitment`);
      revealed[e.fact.seat] = e.fact.value;
    }
    const seats = Object.keys(deal.fact.seeds);
    const withheld = seats.filter((s) => commitments[s] && revealed[s] === undefined).sort();
    must('ceremony', same([...(deal.fact.withheld || [])].sort(), withheld), 'the withheld seats are not those that committed and did not reveal');
    for (const s of seats) {
      must('ceremony', (deal.fact.seeds[s] ?? null) === (revealed[s] ?? null), `the deal's seed for ${s} is not its reveal`);
    }
    const mixed = await sha256(canonical(Object.fromEntries(seats.map((s) => [s, revealed[s] || '']))));
    must('ceremony', deal.fact.mix === mixed, 'the mix is not the sha256 of the revealed seeds');
    const early = events.find((e) => e.version < deal.version && e.fact.rng);
    must('ceremony', !early, early ? `an outcome (version ${early.version}) comes before the deal` : '');
    say('ceremony', `${Object.keys(revealed).length} revealed, ${withheld.length} withheld`);

    // derivations: the counter, and each outcome again from the secret.
    const key = await crypto.subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    let n = 0;
    for (const e of events) {
      const rng = e.fact.rng;
      if (!rng) continue;
      must('derivations', rng.n === n, `version ${e.version} is random call ${rng.n}, where ${n} comes next`);
      must('derivations', rng.mix === deal.fact.mix, `version ${e.version} derives from another mix`);
      must('derivations', Array.isArray(rng.input), `version ${e.version} records no input list`);
      const field = Object.keys(OUTCOMES).find((f) => Array.isArray(e.fact[f]));
      must('derivations', field, `version ${e.version} (${e.type}) holds no outcome this page knows`);
      const whole = await shuffle(words(key, room, n, rng.mix), rng.input);
      const outcome = e.fact[field];
      const derived = OUTCOMES[field] === 'sample' ? whole.slice(0, outcome.length) : whole;
      must('derivations', same(derived, outcome), `version ${e.version} (${e.type}): the outcome is not the derivation of call ${n}`);
      n += 1;
    }
    say('derivations', `${n} random calls derived again`);
  }

  return { V2, unable, holding, seeded, keep, accepted, acceptedIds, sign, fingerprint, check, CHECKS,
    canonical };
})();
