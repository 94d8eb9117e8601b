// Loaded between require.js and embed-amd.js on pages with widgets (see
// nb_ipywidgets_js in _config.yml). The ipywidgets HTML manager finds its
// font files next to the AMD module path; point that path at the book's own
// copy, so pages in any folder load them from _assets/html-manager/.
(function () {
  var here = document.currentScript && document.currentScript.src;
  if (!here || typeof require === "undefined") return;
  require.config({
    paths: {"@jupyter-widgets/html-manager/dist": new URL("../html-manager", here).href}
  });
})();
