// The console's login page: posts the name and password to /_session (which sets the
// AuthSession cookie) and reloads, so that /_utils/ then serves the console itself.
"use strict";

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("login-error");
  const button = document.getElementById("login-submit");
  const name = document.getElementById("login-name").value;
  const password = document.getElementById("login-password").value;
  error.hidden = true;
  button.disabled = true;
  try {
    const res = await fetch("/_session", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ name, password }),
    });
    if (res.ok) {
      location.reload();
      return;
    }
    const body = await res.json().catch(() => ({}));
    error.textContent = body.reason || `Login failed (${res.status})`;
  } catch (err) {
    error.textContent = `Cannot reach the server: ${err.message}`;
  }
  error.hidden = false;
  button.disabled = false;
});
