// Route group: data-layer (filled in by its issue work).
import { routes } from './types.js';

export const dataLayerRoutes = routes({});
