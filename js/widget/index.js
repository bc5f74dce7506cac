export default { render({ model, el }) { el.textContent = 'syft_lab'; return () => {}; } };
