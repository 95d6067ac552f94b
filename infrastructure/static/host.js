// The host page: the operator's rooms, creating one, each seat's invitation, a seat token
// reissued, a room ended and its transcript. It calls the operator routes with the
// operator token (kept in this tab's session storage) and shows what the server answers.
// What cannot be taken back asks once. Text is set as text.
(() => {
  'use strict';

  const KEY = 'dune-ledger:operator';
  const INVITED = 'dune-ledger:invitations';
  const { $, h, fname, confirmation, persist, download, showError, clearError } = window.duneLedger;
  let token = sessionStorage.getItem(KEY);
  let timer = null;
  let shown = '';

  const call = (path, options) => window.duneLedger.call(path, token, options);

  const when = (at) => (at && !Number.isNaN(Date.parse(at)) ? new Date(at).toLocaleString() : at || '');
  const invitation = (path, secret) => `${location.origin}${path}#token=${encodeURIComponent(secret)}`;
  const seatsOf = (seats) => seats.map(fname).join(', ');

  // The invitations this tab has made, newest room first: {room, seats, tokens: {faction:
  // token}, spectator, renewed: [faction]}. Kept in the tab's session storage
  // with the operator token, so that a new token for one seat leaves the others' links.
  let invited = JSON.parse(sessionStorage.getItem(INVITED) || '[]');

  function keepInvitations() {
    sessionStorage.setItem(INVITED, JSON.stringify(invited));
    drawInvitations();
  }

  function invite(key, who, address, renewed) {
    return h('li', { 'data-invite': key, class: renewed ? 'renewed' : null },
      who, renewed ? h('span', { class: 'hint', text: ' new token: the old one no longer works' }) : null,
      h('span', { class: 'invite', text: address }));
  }

  function drawInvitations() {
    $('invites').hidden = invited.length === 0;
    $('invites-body').replaceChildren(...invited.map((r) => h('div', { class: 'invited', 'data-room': r.room },
      h('h3', { text: seatsOf(r.seats) }),
      h('p', { class: 'room', text: `Room ${r.room}` }),
      h('ul', { class: 'stack invites' },
        // A room this tab did not create holds only the tokens it reissued.
        r.seats.filter((f) => r.tokens[f]).map((f) => invite(f,
          h('span', { class: 'faction f-' + f, text: fname(f) }),
          invitation('/play/' + r.room, r.tokens[f]), r.renewed.includes(f))),
        r.spectator ? invite('spectator', h('strong', { text: 'Spectators' }),
          invitation('/watch/' + r.room, r.spectator), false) : null))));
  }

  // Asks once (`confirming` holds what waits for its answer), then acts.
  let confirming = null;

  function asking(key, label, says, yes, no, act, cls = 'danger') {
    if (confirming !== key) {
      return h('button', { type: 'button', class: cls, 'data-key': key,
        onclick: () => { confirming = key; redraw(`yes:${key}`); } }, label);
    }
    return confirmation(label.replace(/…$/, '?'), says,
      h('button', { type: 'button', class: 'danger', 'data-key': `yes:${key}`,
        onclick: (e) => act(e.currentTarget) }, yes),
      h('button', { type: 'button', 'data-key': `no:${key}`,
        onclick: () => { confirming = null; redraw(key); } }, no));
  }

  async function reissue(room, faction, button) {
    clearError();
    button.disabled = true;
    let issued;
    try {
      issued = await call(`/rooms/${encodeURIComponent(room.room)}/seats/${encodeURIComponent(faction)}/token`,
        { method: 'POST' });
    } catch (e) {
      showError(e.message);
      button.disabled = false;
      return;
    }
    confirming = null;
    let kept = invited.find((r) => r.room === room.room);
    if (!kept) {
      kept = { room: room.room, seats: room.seats, tokens: {}, spectator: null, renewed: [] };
      invited.unshift(kept);
    }
    kept.tokens[faction] = issued.token;
    kept.renewed = [...new Set([...kept.renewed, faction])];
    keepInvitations();
    redraw();
    $('invites-title').focus();
  }

  // Ending a room asks once. The press keeps one command_id, so a press sent again (an
  // answer lost, a 503) is still one end.
  const ending = new Map(); // room -> its end's command_id, once asked for

  function redraw(focusKey) {
    shown = '';
    drawRooms(rooms);
    const again = focusKey && document.querySelector(`[data-key="${CSS.escape(focusKey)}"]`);
    if (again) again.focus();
  }

  async function end(room, button) {
    clearError();
    button.disabled = true;
    if (!ending.has(room)) ending.set(room, 'host-' + crypto.randomUUID());
    const body = JSON.stringify({ command_id: ending.get(room) });
    try {
      await persist(() => call(`/rooms/${encodeURIComponent(room)}/end`, { method: 'POST', body,
        headers: { 'Content-Type': 'application/json' } }));
    } catch (e) {
      showError(e.message);
      button.disabled = false;
      return;
    }
    confirming = null;
    await load();
    const next = document.querySelector(`[data-key="${CSS.escape(`transcript:${room}`)}"]`);
    if (next) next.focus();
  }

  // Without an operator token (a server on loopback without one) the download sends none.
  async function downloadTranscript(room, button) {
    clearError();
    button.disabled = true;
    try {
      await download(`/rooms/${encodeURIComponent(room)}/transcript`, token, `transcript-${room}.jsonl`);
    } catch (e) {
      showError(e.message);
    } finally {
      button.disabled = false;
    }
  }

  // --- fair dealing (RULES 9.4): the ceremony's stage and the operator's Deal -----

  const dealing = new Map(); // room -> its deal's command_id, once asked for

  async function deal(room, button) {
    clearError();
    button.disabled = true;
    if (!dealing.has(room)) dealing.set(room, 'host-' + crypto.randomUUID());
    const body = JSON.stringify({ type: 'deal', command_id: dealing.get(room) });
    try {
      await persist(() => call(`/rooms/${encodeURIComponent(room)}/commands`, { method: 'POST', body,
        headers: { 'Content-Type': 'application/json' } }));
    } catch (e) {
      showError(e.message);
      button.disabled = false;
      return;
    }
    dealing.delete(room); // a later deal (the reveal stage's) is a new command
    confirming = null;
    await load();
    const next = document.querySelector(`[data-key="${CSS.escape(`deal:${room}`)}"]`)
      || document.querySelector(`[data-room="${CSS.escape(room)}"] h3`);
    if (next) next.focus();
  }

  // What Deal does now, said before it is done: it cannot be taken back.
  function dealSays(f, seats) {
    const committed = seats.filter((s) => f.commitments[s]);
    const names = (list) => list.map(fname).join(', ');
    if (f.stage === 'reveal') {
      const late = committed.filter((s) => !f.seeds[s]);
      return late.length ? `Deals now: ${names(late)} committed and did not reveal, and will be `
        + 'recorded as withheld, publicly.' : 'Deals now.';
    }
    if (!committed.length) {
      return 'No seat has committed a seed: the deal happens now, from the server\'s secret alone.';
    }
    const out = seats.filter((s) => !f.commitments[s]);
    return 'Starts the reveal stage now: commitments no longer change'
      + (out.length ? `, and ${names(out)} ${out.length === 1 ? 'takes' : 'take'} no part in the deal.`
        : '.');
  }

  function drawCeremony(r) {
    const f = r.fairness;
    if (!f || f.mode !== 'committed' || !f.stage) return null;
    const count = (pick) => r.seats.filter(pick).length;
    const stage = {
      commit: `Commit stage: ${count((s) => f.commitments[s])} of ${r.seats.length} seats committed.`,
      reveal: `Reveal stage: ${count((s) => f.seeds[s])} of ${count((s) => f.commitments[s])} `
        + 'committed seats revealed.',
      dealt: 'Dealt' + (f.withheld.length ? `; withheld reveals: ${f.withheld.map(fname).join(', ')}.` : '.'),
    }[f.stage];
    const stalled = f.stage !== 'dealt' && !r.ended;
    return h('div', { class: 'ceremony', 'data-stage': f.stage },
      h('p', {}, h('strong', { text: 'Fair dealing ' }), h('span', { class: 'stage', text: stage })),
      stalled ? asking(`deal:${r.room}`, 'Deal…', dealSays(f, r.seats), 'Yes, deal', 'No, wait',
        (button) => deal(r.room, button), null) : null);
  }

  let rooms = [];

  function drawRoom(r) {
    const last = r.last_command;
    const kept = invited.find((k) => k.room === r.room);
    const spectators = kept && kept.spectator ? invitation('/watch/' + r.room, kept.spectator) : null;
    return h('li', { class: 'panel', 'data-room': r.room },
      h('h3', {}, h('span', { class: 'title', text: seatsOf(r.seats) }),
        h('span', { class: 'room', text: `Room ${r.room}` })),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Created' }), h('dd', { text: when(r.created) }),
        h('dt', { text: 'Last move' }), h('dd', { class: 'last-move',
          text: last ? `${last.text}, ${when(last.at)}` : 'none yet' }),
        h('dt', { text: 'Version' }), h('dd', { 'data-version': r.version, text: String(r.version) })),
      h('div', { class: 'row wrap' },
        spectators ? h('a', { href: spectators, target: '_blank', rel: 'noopener' }, 'Spectator page')
          : h('span', { class: 'hint', text: 'Spectator page: its address was shown when the room was '
            + 'created.' }),
        r.ended ? [h('span', { class: 'notice', 'data-ended': r.ended, text: `Ended at version ${r.ended}` }),
          h('button', { type: 'button', class: 'primary', 'data-key': `transcript:${r.room}`,
            onclick: (e) => downloadTranscript(r.room, e.currentTarget) }, 'Download the transcript')]
          : asking(`end:${r.room}`, 'End room…', 'Ending publishes the secret; no command is taken after.',
            'Yes, end it', 'No, keep it running', (button) => end(r.room, button))),
      drawCeremony(r),
      h('ul', { class: 'seats' }, r.seats.map((f) => h('li', { class: 'seat f-' + f, 'data-seat': f },
        h('span', { class: 'faction f-' + f, text: fname(f) }),
        r.ended ? null : asking(`reissue:${r.room}:${f}`, `New token for ${fname(f)}…`,
          `${fname(f)}'s current token stops working at once, on every page open with it. `
          + 'The new invitation is shown here, beside the others.',
          'Yes, issue a new token', 'No, keep the current one', (button) => reissue(r, f, button),
          null)))),
      r.ended ? null : openBidding(r));
  }

  // --- the Bidding round (RULES 10.1) -----------------------------------------

  // The operator opens a round with the bidding order, from the First Player on (the
  // host knows where the storm is; the page does not). One choice per place, the seats'
  // own order to start with; the server refuses an order that misses or repeats a seat.
  // What is chosen survives the list being read again every 2 s.
  const PLACES = ['First', 'Second', 'Third', 'Fourth', 'Fifth', 'Sixth', 'Seventh', 'Eighth', 'Ninth',
    'Tenth', 'Eleventh', 'Twelfth'];
  const orders = new Map(); // room -> the order being chosen, while its form is open
  const opening = new Map(); // room -> the command_id of its open_bidding, once pressed

  function openBidding(r) {
    const key = `bidding:${r.room}`;
    if (!orders.has(r.room)) {
      return h('div', { class: 'row wrap' }, h('button', { type: 'button', 'data-key': key,
        onclick: () => { orders.set(r.room, [...r.seats]); redraw(`order:${r.room}:0`); } },
      'Open bidding…'));
    }
    const order = orders.get(r.room);
    const places = order.map((f, i) => {
      const id = `order-${r.room}-${i}`;
      return h('li', {}, h('label', { for: id, text: `${PLACES[i] || i + 1} to bid` }),
        h('select', { id, 'data-key': `order:${r.room}:${i}`,
          onchange: (e) => { order[i] = e.currentTarget.value; } },
        r.seats.map((s) => h('option', { value: s, selected: s === f, text: fname(s) }))));
    });
    const form = h('form', { class: 'stack open-bidding', 'data-bidding': r.room },
      h('p', { class: 'title', text: 'Bidding order, from the First Player on' }),
      h('ol', { class: 'stack order' }, places),
      h('div', { class: 'row wrap' },
        h('button', { type: 'submit', class: 'primary', 'data-key': `open:${r.room}` }, 'Open bidding'),
        h('button', { type: 'button', 'data-key': `cancel:${r.room}`,
          onclick: () => { orders.delete(r.room); opening.delete(r.room); redraw(key); } }, 'Not now')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      send(r.room, { type: 'open_bidding', order: [...order] }, form.querySelector('[type=submit]'));
    });
    return form;
  }

  // An operator command: one press is one command_id, sent again when its answer is lost.
  async function send(room, command, button) {
    clearError();
    button.disabled = true;
    if (!opening.has(room)) opening.set(room, 'host-' + crypto.randomUUID());
    const body = JSON.stringify({ ...command, command_id: opening.get(room) });
    try {
      await persist(() => call(`/rooms/${encodeURIComponent(room)}/commands`, { method: 'POST', body,
        headers: { 'Content-Type': 'application/json' } }));
    } catch (e) {
      opening.delete(room); // refused: a corrected order is a new command
      showError(e.message);
      button.disabled = false;
      return;
    }
    orders.delete(room);
    opening.delete(room);
    await load();
    redraw(`bidding:${room}`); // the room's last move now says the round is open
  }

  function drawRooms(next) {
    rooms = next;
    const text = JSON.stringify(rooms);
    if (text === shown) return;
    shown = text;
    const list = $('rooms-body');
    if (!rooms.length) {
      list.replaceChildren(h('li', { class: 'hint', text: 'No rooms yet.' }));
      return;
    }
    // The newest room first: the one being set up or played tonight.
    const newest = [...rooms].sort((a, b) => String(b.created).localeCompare(String(a.created)));
    list.replaceChildren(...newest.map(drawRoom));
  }

  async function load() {
    try {
      drawRooms(await call('/rooms'));
      $('status').textContent = 'Live (reading every 2 s)';
      if ($('error').textContent === 'The server does not answer.') clearError();
      return true;
    } catch (e) {
      if (e.status === 401) {
        stop();
        showError(e.message);
        return false;
      }
      $('status').textContent = 'Reconnecting…';
      showError(e.message);
      return true;
    }
  }

  function stop() {
    if (timer) clearInterval(timer);
    timer = null;
    token = null;
    sessionStorage.removeItem(KEY);
    invited = [];
    sessionStorage.removeItem(INVITED);
    $('desk').hidden = true;
    $('leave').hidden = true;
    $('token-form').hidden = false;
    $('status').textContent = 'Not connected';
    $('token').focus();
  }

  async function start() {
    $('token-form').hidden = true;
    if (!(await load())) return;
    drawInvitations();
    $('desk').hidden = false;
    $('leave').hidden = !token;
    if (!timer) timer = setInterval(load, 2000);
  }

  $('example').addEventListener('change', async (e) => {
    if (!e.target.value) return;
    try {
      const layout = await call('/host/examples/' + encodeURIComponent(e.target.value));
      $('layout').value = JSON.stringify(layout, null, 2);
    } catch (err) {
      showError(err.message);
    }
  });

  $('create-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearError();
    let layout;
    try {
      layout = JSON.parse($('layout').value);
    } catch (err) {
      showError('The layout is not JSON: ' + err.message);
      return;
    }
    try {
      const created = await call('/rooms', { method: 'POST', body: JSON.stringify(layout),
        headers: { 'Content-Type': 'application/json' } });
      invited.unshift({ room: created.room, seats: Object.keys(created.seats), tokens: created.seats,
        spectator: created.spectator, renewed: [] });
      keepInvitations();
      $('invites-title').focus();
      await load();
    } catch (err) {
      showError(err.message);
    }
  });

  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const value = $('token').value.trim();
    if (!value) return;
    $('token').value = '';
    clearError();
    token = value;
    sessionStorage.setItem(KEY, value);
    start();
  });

  $('leave').addEventListener('click', stop);

  // A server without an operator token answers the operator routes as they are; one with
  // it answers 401 and the page asks for the token.
  start();
})();
