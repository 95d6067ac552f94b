// The host page: the operator's rooms, creating one, each seat's invitation, and a seat
// token reissued. It calls the operator routes with the operator token (kept in this
// tab's session storage) and shows what the server answers. Text is set as text.
(() => {
  'use strict';

  const root = document.getElementById('host');
  const KEY = 'dune-ledger:operator';
  const FACTIONS = JSON.parse(root.dataset.factions || '{}');
  const fname = (f) => FACTIONS[f] || f;
  const { $, h, persist, download, showError, clearError } = window.duneLedger;
  let token = sessionStorage.getItem(KEY);
  let timer = null;
  let shown = '';

  const call = (path, options) => window.duneLedger.call(path, token, options);

  const when = (at) => (at && !Number.isNaN(Date.parse(at)) ? new Date(at).toLocaleString() : at || '');
  const invitation = (path, secret) => `${location.origin}${path}#token=${encodeURIComponent(secret)}`;

  function invite(room, faction, secret) {
    return h('li', { 'data-invite': faction },
      h('span', { class: 'faction f-' + faction, text: fname(faction) }), ' ',
      h('span', { class: 'invite', text: invitation('/play/' + room, secret) }));
  }

  function showInvites(title, room, seats, spectator) {
    $('invites-body').replaceChildren(
      h('h3', { text: title }),
      h('ul', { class: 'stack' },
        Object.entries(seats).map(([f, t]) => invite(room, f, t)),
        spectator ? h('li', { 'data-invite': 'spectator' }, h('strong', { text: 'Spectators' }), ' ',
          h('span', { class: 'invite', text: invitation('/watch/' + room, spectator) })) : null));
    $('invites').hidden = false;
    $('invites-title').focus();
  }

  async function reissue(room, faction) {
    clearError();
    try {
      const issued = await call(`/rooms/${encodeURIComponent(room)}/seats/${encodeURIComponent(faction)}/token`,
        { method: 'POST' });
      showInvites(`New invitation for ${fname(faction)} (the old token no longer works)`, room,
        { [faction]: issued.token }, null);
    } catch (e) {
      showError(e.message);
    }
  }

  // Ending a room asks once. The press keeps one command_id, so a press sent again (an
  // answer lost, a 503) is still one end.
  const ending = new Map(); // room -> its end's command_id, once asked for
  let confirming = null; // the room whose end waits for its one confirmation

  function endControl(room) {
    if (confirming !== room) {
      return h('button', { type: 'button', class: 'danger', 'data-key': `end:${room}`,
        onclick: () => { confirming = room; redraw(`end-yes:${room}`); } }, 'End room…');
    }
    return h('span', { class: 'confirm', role: 'group', 'aria-label': 'End this room?' },
      h('span', { class: 'hint', text: 'Ending publishes the secret; no command is taken after.' }),
      h('button', { type: 'button', class: 'danger', 'data-key': `end-yes:${room}`,
        onclick: (e) => end(room, e.currentTarget) }, 'Yes, end it'),
      h('button', { type: 'button', 'data-key': `end-no:${room}`,
        onclick: () => { confirming = null; redraw(`end:${room}`); } }, 'No, keep it running'));
  }

  function redraw(focusKey) {
    shown = '';
    drawRooms(rooms);
    const again = document.querySelector(`[data-key="${CSS.escape(focusKey)}"]`);
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
    const next = document.querySelector(`[data-key="transcript:${CSS.escape(room)}"]`);
    if (next) next.focus();
  }

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

  let rooms = [];

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
    list.replaceChildren(...rooms.map((r) => {
      const last = r.last_command;
      return h('li', { class: 'panel', 'data-room': r.room },
        h('h3', {}, 'Room ', h('span', { class: 'room', text: r.room })),
        h('dl', { class: 'facts' },
          h('dt', { text: 'Version' }), h('dd', { 'data-version': r.version, text: String(r.version) }),
          h('dt', { text: 'Last command' }), h('dd', {
            text: last ? `${fname(last.seat)}: ${last.event}, ${when(last.at)}` : 'none yet' }),
          h('dt', { text: 'Created' }), h('dd', { text: when(r.created) })),
        h('div', { class: 'row wrap' },
          h('a', { href: '/watch/' + r.room, text: 'Spectator page' }),
          r.ended ? [h('span', { class: 'notice', 'data-ended': r.ended, text: `Ended at version ${r.ended}` }),
            h('button', { type: 'button', 'data-key': `transcript:${r.room}`,
              onclick: (e) => downloadTranscript(r.room, e.currentTarget) }, 'Download the transcript')]
            : endControl(r.room)),
        h('ul', { class: 'seats' }, r.seats.map((f) => h('li', { class: 'seat f-' + f, 'data-seat': f },
          h('span', { class: 'faction f-' + f, text: fname(f) }),
          h('button', { type: 'button', 'data-key': `reissue:${r.room}:${f}`,
            onclick: () => reissue(r.room, f) }, `New token for ${fname(f)}`)))));
    }));
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
    $('desk').hidden = true;
    $('leave').hidden = true;
    $('token-form').hidden = false;
    $('status').textContent = 'Not connected';
    $('token').focus();
  }

  async function start() {
    $('token-form').hidden = true;
    if (!(await load())) return;
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
      showInvites(`Room ${created.room}`, created.room, created.seats, created.spectator);
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
